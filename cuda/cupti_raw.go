package cuda

/*
#include "cuda.h"
#include "cupti.h"
#include <stdlib.h>

// dr_cupti_raw_launches is dr_raw_launches with each launch bracketed by a
// push and pop of its op id (first, first+1, ... breadth first): the floor
// of an eager run traced with CUPTI, and how the session names launches.
static CUresult dr_cupti_raw_launches(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams,
                                      int rounds, dr_cupti* t, uint64_t first, int* cupti_failed) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	void** params = l->nslots > 0 ? l->params : NULL;
	uint64_t id = first;
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < nstreams; k++) {
			if (dr_cupti_push(t, id++) != DR_CUPTI_SUCCESS) { *cupti_failed = 1; return 0; }
			r = a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, streams[k], params, NULL);
			if (dr_cupti_pop(t) != DR_CUPTI_SUCCESS) { *cupti_failed = 1; return 0; }
			if (r != DR_SUCCESS) return r;
		}
	}
	return a->cuCtxSynchronize();
}

// dr_raw_launches_each_ctx is dr_cupti_raw_launches (untraced where t is
// NULL) making the context current before each launch, as dagrun's launches
// do (dr_ctx: cuCtxGetCurrent, once per launch): what that costs, apart.
static CUresult dr_raw_launches_each_ctx(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams,
                                         int rounds, dr_cupti* t, uint64_t first, int* cupti_failed) {
	void** params = l->nslots > 0 ? l->params : NULL;
	uint64_t id = first;
	CUresult r = DR_SUCCESS;
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < nstreams; k++) {
			r = dr_ctx(a, c);
			if (r != DR_SUCCESS) return r;
			if (t != NULL && dr_cupti_push(t, id++) != DR_CUPTI_SUCCESS) { *cupti_failed = 1; return 0; }
			r = a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, streams[k], params, NULL);
			if (t != NULL && dr_cupti_pop(t) != DR_CUPTI_SUCCESS) { *cupti_failed = 1; return 0; }
			if (r != DR_SUCCESS) return r;
		}
	}
	return a->cuCtxSynchronize();
}

// dr_cupti_raw_graph_marked launches e n times back to back on s, launch i
// with replay marker first+i pushed around it (dr_cupti_graph_launch), then
// synchronises s: replays traced the way a session traces them.
static CUresult dr_cupti_raw_graph_marked(dr_api* a, CUcontext c, CUgraphExec e, CUstream s, int n, dr_cupti* t,
                                          uint64_t first, int* cupti_failed) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	for (int i = 0; i < n; i++) {
		r = dr_cupti_graph_launch(t, a, c, e, s, first + (uint64_t)i, cupti_failed);
		if (*cupti_failed) return DR_SUCCESS;
		if (r != DR_SUCCESS) return r;
	}
	return a->cuStreamSynchronize(s);
}

// dr_cupti_kernel_node_ids writes the CUPTI ids of g's kernel nodes to ids
// (room for *n), and their count to *n; -1 if there are more than room.
static CUresult dr_cupti_kernel_node_ids(dr_api* a, CUgraph g, dr_cupti* t, uint64_t* ids, size_t* n, int* cupti_failed) {
	size_t count = 0;
	CUresult r = a->cuGraphGetNodes(g, NULL, &count);
	if (r != DR_SUCCESS) return r;
	CUgraphNode* nodes = calloc(count ? count : 1, sizeof(CUgraphNode));
	if (nodes == NULL) return 2; // CUDA_ERROR_OUT_OF_MEMORY
	r = a->cuGraphGetNodes(g, nodes, &count);
	size_t k = 0;
	for (size_t i = 0; r == DR_SUCCESS && i < count; i++) {
		int type = -1;
		r = a->cuGraphNodeGetType(nodes[i], &type);
		if (r != DR_SUCCESS || type != 0) continue; // CU_GRAPH_NODE_TYPE_KERNEL
		if (k == *n) { r = 1; break; } // CUDA_ERROR_INVALID_VALUE: no room
		if (dr_cupti_graph_node_id(t, nodes[i], &ids[k]) != DR_CUPTI_SUCCESS) { *cupti_failed = 1; break; }
		k++;
	}
	free(nodes);
	*n = k;
	return r;
}
*/
import "C"

import (
	"errors"
	"runtime"
)

// tracedLaunchesC is rawLoop.launchesC with each launch named to t by op
// ids first, first+1, ... (rounds x streams of them, breadth first).
func (r *rawLoop) tracedLaunchesC(t *activityTracer, rounds int, first uint64) error {
	var failed C.int
	rc := C.dr_cupti_raw_launches(r.b.drv.api, r.d.ctx, r.launch, r.streams, C.int(r.n), C.int(rounds), t.lib, C.uint64_t(first), &failed)
	if failed != 0 {
		return errors.New("cupti: pushing or popping an op failed")
	}
	return r.b.drv.check("cuLaunchKernel", rc)
}

// launchesEachCtx is launchesC, traced through t (when not nil) as
// tracedLaunchesC is, with the context made current before each launch.
func (r *rawLoop) launchesEachCtx(t *activityTracer, rounds int, first uint64) error {
	var failed C.int
	var lib *C.dr_cupti
	if t != nil {
		lib = t.lib
	}
	rc := C.dr_raw_launches_each_ctx(r.b.drv.api, r.d.ctx, r.launch, r.streams, C.int(r.n), C.int(rounds), lib, C.uint64_t(first), &failed)
	if failed != 0 {
		return errors.New("cupti: pushing or popping an op failed")
	}
	return r.b.drv.check("cuLaunchKernel", rc)
}

// tracedCall runs one driver call with op pushed around it, on one OS
// thread: CUPTI keeps the pushed ids per thread.
func (t *activityTracer) tracedCall(op int, call func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := t.pushOp(op); err != nil {
		return err
	}
	err := call()
	if perr := t.popOp(); err == nil {
		err = perr
	}
	return err
}

// markedLaunches replays the graph n times back to back on its origin
// stream, launch i marked as replay first+i (see replayMarker), and waits
// for them, from one C loop.
func (g *rawGraph) markedLaunches(t *activityTracer, n int, first int64) error {
	var failed C.int
	rc := C.dr_cupti_raw_graph_marked(g.r.b.drv.api, g.r.d.ctx, g.exec, *g.r.streams, C.int(n), t.lib,
		C.uint64_t(replayMarker+first), &failed)
	if failed != 0 {
		return errors.New("cupti: pushing or popping a replay marker failed")
	}
	return g.r.b.drv.check("cuGraphLaunch", rc)
}

// cuptiKernelNodeIDs are the CUPTI ids of the captured graph's kernel
// nodes (at most max of them), as replay records name them once resolved.
func (g *rawGraph) cuptiKernelNodeIDs(t *activityTracer, max int) ([]uint64, error) {
	ids := make([]C.uint64_t, max)
	n := C.size_t(max)
	var failed C.int
	rc := C.dr_cupti_kernel_node_ids(g.r.b.drv.api, g.tmpl, t.lib, &ids[0], &n, &failed)
	if failed != 0 {
		return nil, errors.New("cupti: cuptiGetGraphNodeId failed")
	}
	if err := g.r.b.drv.check("cuGraphGetNodes", rc); err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(ids[i])
	}
	return out, nil
}
