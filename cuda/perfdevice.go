package cuda

/*
#include "cuda.h"

static CUresult w_sm_count(dr_api* a, int* v, CUdevice d) {
	return a->cuDeviceGetAttribute(v, 16, d); // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
}
*/
import "C"

import "fmt"

// DeviceInfo is what perf models key their measurements by: device
// ordinal's name and multiprocessor count (the driver version is
// DriverVersion). It makes no context.
func (b *Backend) DeviceInfo(ordinal int) (name string, sms int, err error) {
	if b == nil || b.drv == nil {
		return "", 0, fmt.Errorf("cuda: DeviceInfo: backend not made by New")
	}
	info, err := b.drv.device(ordinal)
	if err != nil {
		return "", 0, err
	}
	n, err := b.drv.smCount(info)
	return info.name, n, err
}

// smCount is the multiprocessor count of the device info describes.
func (d *driver) smCount(info deviceInfo) (int, error) {
	var n C.int
	if err := d.check("cuDeviceGetAttribute", C.w_sm_count(d.api, &n, info.dev)); err != nil {
		return 0, err
	}
	return int(n), nil
}
