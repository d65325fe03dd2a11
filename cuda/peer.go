package cuda

/*
#include <stdlib.h>
#include "cuda.h"

static CUresult p_can_access(dr_api* a, int* can, CUdevice dev, CUdevice peer) {
	if (a->cuDeviceCanAccessPeer == NULL) return DR_ERROR_NOT_FOUND;
	return a->cuDeviceCanAccessPeer(can, dev, peer);
}
// p_enable makes c current and lets it reach peer's memory.
static CUresult p_enable(dr_api* a, CUcontext c, CUcontext peer) {
	if (a->cuCtxEnablePeerAccess == NULL) return DR_ERROR_NOT_FOUND;
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuCtxEnablePeerAccess(peer, 0);
}
static CUresult p_pool_access(dr_api* a, CUcontext c, CUmemoryPool pool, const dr_mem_access_desc* descs, size_t n) {
	if (a->cuMemPoolSetAccess == NULL) return DR_ERROR_NOT_FOUND;
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuMemPoolSetAccess(pool, descs, n);
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

const (
	codePeerAccessAlreadyEnabled = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	memLocationTypeDevice        = 1   // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessProtReadWrite       = 3   // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
)

// peerMatrix says which devices reach which directly: m[i][j] is true when
// device i reads and writes device j's memory over the link (NVLink or
// PCIe peer-to-peer) instead of through host memory.
type peerMatrix [][]bool

// canAccessPeer reports whether the hardware lets dev reach peer's memory.
func (d *driver) canAccessPeer(dev, peer C.CUdevice) (bool, error) {
	var can C.int
	err := d.check("cuDeviceCanAccessPeer", C.p_can_access(d.api, &can, dev, peer))
	return can != 0, err
}

// enablePeerAccess enables access in both directions between every pair of
// devices (devs[i] with primary context ctxs[i]) that the hardware allows,
// and returns which pairs have it. Access already enabled counts as
// enabled. It is called once at backend open; peer copies between pairs
// without access still work, through host memory, at a tenth of the speed.
func (d *driver) enablePeerAccess(devs []C.CUdevice, ctxs []C.CUcontext) (peerMatrix, error) {
	m := make(peerMatrix, len(devs))
	for i := range m {
		m[i] = make([]bool, len(devs))
	}
	for i := range devs {
		for j := range devs {
			if i == j {
				continue
			}
			can, err := d.canAccessPeer(devs[i], devs[j])
			if err != nil {
				return m, err
			}
			if !can {
				continue
			}
			err = d.check("cuCtxEnablePeerAccess", C.p_enable(d.api, ctxs[i], ctxs[j]))
			var e *Error
			if err != nil && !(errors.As(err, &e) && e.Code == codePeerAccessAlreadyEnabled) {
				return m, err
			}
			m[i][j] = true
		}
	}
	return m, nil
}

// peerAccess gives every device devs[j] that reaches the memory of
// devs[owner] (m[j][owner], as enablePeerAccess returned it for devs)
// read-write access to that device's memory pool, so that stream-ordered
// temporaries are reachable from peers too (cuMemPoolSetAccess: pool memory
// is private to its device until then). ctx is devs[owner]'s context.
func (d poolCalls) peerAccess(ctx C.CUcontext, pool C.CUmemoryPool, owner int, devs []C.CUdevice, m peerMatrix) error {
	var descs []C.dr_mem_access_desc
	for j := range m {
		if j != owner && m[j][owner] {
			descs = append(descs, C.dr_mem_access_desc{locationType: memLocationTypeDevice, locationId: C.int(devs[j]), flags: memAccessProtReadWrite})
		}
	}
	if len(descs) == 0 {
		return nil
	}
	cd := (*C.dr_mem_access_desc)(C.malloc(C.size_t(len(descs)) * C.sizeof_dr_mem_access_desc))
	if cd == nil {
		return &Error{Call: "cuMemPoolSetAccess", Code: codeOutOfMemory, Name: "out of host memory"}
	}
	defer C.free(unsafe.Pointer(cd))
	copy(unsafe.Slice(cd, len(descs)), descs)
	return d.check("cuMemPoolSetAccess", C.p_pool_access(d.api, ctx, pool, cd, C.size_t(len(descs))))
}
