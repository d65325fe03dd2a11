package cuda

/*
#include <stdlib.h>
#include "nccl.h"

// p_raw_peer_copies issues n cuMemcpyPeerAsync calls on s from one C loop
// and synchronises s: the floor of peer-copy benchmarks.
static CUresult p_raw_peer_copies(dr_api* a, CUcontext c, CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t bytes, CUstream s, int n) {
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	for (int i = 0; i < n; i++) {
		r = a->cuMemcpyPeerAsync(dst, dc, src, sc, bytes, s);
		if (r != 0) return r;
	}
	return a->cuStreamSynchronize(s);
}
*/
import "C"

import "unsafe"

// Names of the driver's handle types for the package's tests, which cannot
// name C types themselves.
type (
	cuContext = C.CUcontext
	cuDevice  = C.CUdevice
	cuStream  = C.CUstream
	cuDevptr  = C.CUdeviceptr
)

// rawAllReduce calls ncclAllReduce for each call (grouped when there are
// several) iters times from one C loop: the floor that the binding's
// group is compared with.
func (n *ncclLib) rawAllReduce(calls []ncclCall, iters int) error {
	cc, err := n.cCalls(calls)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cc))
	return n.check("ncclAllReduce", C.dr_nccl_raw_all_reduce(n.lib, cc, C.int(len(calls)), C.int(iters)))
}

// peerCopy copies bytes from src (context sc) to dst (context dc) on stream
// s of context c, as the backend's peer copies do.
func (d *driver) peerCopy(c C.CUcontext, dst C.CUdeviceptr, dc C.CUcontext, src C.CUdeviceptr, sc C.CUcontext, bytes int64, s C.CUstream) error {
	return d.check("cuMemcpyPeerAsync", C.dr_peer_async(d.api, c, dst, dc, src, sc, C.size_t(bytes), s))
}

// rawPeerCopies issues n peer copies from one C loop and synchronises s.
func (d *driver) rawPeerCopies(c C.CUcontext, dst C.CUdeviceptr, dc C.CUcontext, src C.CUdeviceptr, sc C.CUcontext, bytes int64, s C.CUstream, n int) error {
	return d.check("cuMemcpyPeerAsync", C.p_raw_peer_copies(d.api, c, dst, dc, src, sc, C.size_t(bytes), s, C.int(n)))
}

// peerDeclared lists the sizes and values peer.go declares by hand, for
// TestNCCLHeader to compare with the real cuda.h.
func peerDeclared() map[string]int {
	return map[string]int{
		"sizeof(CUmemAccessDesc)":                int(C.sizeof_dr_mem_access_desc),
		"CU_MEM_LOCATION_TYPE_DEVICE":            memLocationTypeDevice,
		"CU_MEM_ACCESS_FLAGS_PROT_READWRITE":     memAccessProtReadWrite,
		"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": codePeerAccessAlreadyEnabled,
	}
}
