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

// p_raw_staged_copies copies bytes from src (device of context uc) to dst
// (context c) reps times through the pinned buffer stage, double-buffered
// as a C programmer writes it: chunk k goes down on stream up into slot
// k % slots, and up on stream s, with an event per slot and direction; then
// it synchronises s. The floor of copies through host memory.
static CUresult p_raw_staged_copies(dr_api* a, CUcontext c, CUstream s, CUcontext uc, CUstream up, CUdeviceptr dst, CUdeviceptr src,
                                    size_t bytes, void* stage, size_t chunk, int slots, int reps) {
	CUevent full[8], empty[8], start;
	CUresult r;
	if (slots < 1 || slots > 8) return 1; // CUDA_ERROR_INVALID_VALUE
	if ((r = dr_ctx(a, c)) != 0 || (r = a->cuEventCreate(&start, DR_EVENT_DISABLE_TIMING)) != 0) return r;
	for (int j = 0; j < slots; j++) {
		if ((r = dr_ctx(a, c)) != 0 || (r = a->cuEventCreate(&empty[j], DR_EVENT_DISABLE_TIMING)) != 0) return r;
		if ((r = dr_ctx(a, uc)) != 0 || (r = a->cuEventCreate(&full[j], DR_EVENT_DISABLE_TIMING)) != 0) return r;
	}
	size_t chunks = (bytes + chunk - 1) / chunk;
	for (int i = 0; i < reps && r == 0; i++) {
		a->cuCtxSetCurrent(c);
		a->cuEventRecord(start, s);
		a->cuCtxSetCurrent(uc);
		a->cuStreamWaitEvent(up, start, 0);
		for (size_t k = 0; k < chunks; k++) {
			size_t j = k % slots, off = k * chunk, len = bytes - off < chunk ? bytes - off : chunk;
			char* h = (char*)stage + j * chunk;
			a->cuCtxSetCurrent(uc);
			if (k >= (size_t)slots) a->cuStreamWaitEvent(up, empty[j], 0);
			r = a->cuMemcpyDtoHAsync(h, src + off, len, up);
			a->cuEventRecord(full[j], up);
			a->cuCtxSetCurrent(c);
			a->cuStreamWaitEvent(s, full[j], 0);
			if (r == 0) r = a->cuMemcpyHtoDAsync(dst + off, h, len, s);
			a->cuEventRecord(empty[j], s);
		}
	}
	a->cuCtxSetCurrent(c);
	CUresult rs = a->cuStreamSynchronize(s);
	a->cuEventDestroy(start);
	for (int j = 0; j < slots; j++) {
		a->cuEventDestroy(empty[j]);
		a->cuEventDestroy(full[j]);
	}
	return r != 0 ? r : rs;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

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

// rawCollGraph is a graph captured by hand for a floor: graphs of NCCL's
// kernels need not run as fast as its eager calls.
type rawCollGraph struct {
	d *driver
	c C.CUcontext
	s C.CUstream
	e C.CUgraphExec
}

// rawAllReduceGraph captures call chain times on its stream of context c by
// hand (begin, ncclAllReduce, end, instantiate), as the floor of replayed
// collectives.
func (n *ncclLib) rawAllReduceGraph(d *driver, c C.CUcontext, call ncclCall, chain int) (*rawCollGraph, error) {
	s := C.CUstream(call.Stream)
	if err := d.check("cuStreamBeginCapture_v2", C.dr_capture_begin(d.api, c, s)); err != nil {
		return nil, err
	}
	capErr := n.rawAllReduce([]ncclCall{call}, chain)
	var g C.CUgraph
	if err := d.check("cuStreamEndCapture", C.dr_capture_end(d.api, c, s, &g)); err != nil || capErr != nil {
		if g != nil {
			C.dr_graph_destroy(d.api, c, g)
		}
		return nil, errors.Join(capErr, err)
	}
	defer C.dr_graph_destroy(d.api, c, g)
	r := &rawCollGraph{d: d, c: c, s: s}
	if err := d.check("cuGraphInstantiate", C.dr_graph_instantiate(d.api, c, &r.e, g, s)); err != nil {
		return nil, err
	}
	return r, nil
}

// replay launches the graph n times and synchronises its stream.
func (r *rawCollGraph) replay(n int) error {
	for range n {
		if err := r.d.check("cuGraphLaunch", C.dr_graph_launch(r.d.api, r.c, r.e, r.s)); err != nil {
			return err
		}
	}
	return r.d.streams.sync(r.c, r.s)
}

func (r *rawCollGraph) close() { C.dr_graph_exec_destroy(r.d.api, r.c, r.e) }

// peerCopy copies bytes from src to dst on stream s of context c, as the
// backend's peer copies do (cuMemcpyAsync on unified addresses).
func (d rawCalls) peerCopy(c C.CUcontext, dst C.CUdeviceptr, src C.CUdeviceptr, bytes int64, s C.CUstream) error {
	return d.check("cuMemcpyAsync", C.dr_copy_async(d.api, c, dst, src, C.size_t(bytes), s))
}

// stagedCopies copies bytes from src (on up's device, context uc) to
// dst (context c) n times through the pinned buffer stage, in chunks of
// chunk bytes through slots slots, from one C loop, and synchronises s.
func (d rawCalls) stagedCopies(c C.CUcontext, s C.CUstream, uc C.CUcontext, up C.CUstream, dst, src C.CUdeviceptr, bytes int64, stage unsafe.Pointer, chunk int64, slots, n int) error {
	return d.check("cuMemcpyDtoHAsync_v2/cuMemcpyHtoDAsync_v2 (raw staged)", C.p_raw_staged_copies(d.api, c, s, uc, up, dst, src, C.size_t(bytes), stage, C.size_t(chunk), C.int(slots), C.int(n)))
}

// peerCopies issues n peer copies from one C loop and synchronises s.
func (d rawCalls) peerCopies(c C.CUcontext, dst C.CUdeviceptr, dc C.CUcontext, src C.CUdeviceptr, sc C.CUcontext, bytes int64, s C.CUstream, n int) error {
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
