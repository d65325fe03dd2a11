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
	var n C.int
	if err := b.drv.check("cuDeviceGetAttribute", C.w_sm_count(b.drv.api, &n, info.dev)); err != nil {
		return "", 0, err
	}
	return info.name, int(n), nil
}
