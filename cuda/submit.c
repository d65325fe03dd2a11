// The C loops of submission: a stretch of plain steps (dr_submit) and a
// graph launch, each with the op or replay marked for CUPTI around its
// driver calls. See cuda.h and cupti.h.
#include "cupti.h"

CUresult dr_cupti_graph_launch(dr_cupti* c, dr_api* a, CUcontext ctx, CUgraphExec e, CUstream s, uint64_t marker,
                               int* cupti_failed) {
	*cupti_failed = 0;
	if (dr_cupti_push(c, marker) != DR_CUPTI_SUCCESS) {
		*cupti_failed = 1;
		return dr_graph_launch(a, ctx, e, s);
	}
	CUresult r = dr_graph_launch(a, ctx, e, s);
	if (dr_cupti_pop(c) != DR_CUPTI_SUCCESS) {
		*cupti_failed = 1;
	}
	return r;
}

// step_call makes the driver call of one plain step; its context is current.
static CUresult step_call(dr_api* a, const dr_step* st, int* lib_status) {
	switch (st->kind) {
	case DR_STEP_GEMM:
		*lib_status = dr_gemm_enqueue(st->lt, st->gemm, st->x, st->y, st->src, st->d, st->bias, st->s);
		return *lib_status == 0 ? DR_SUCCESS : DR_ERROR_LIBRARY;
	case DR_STEP_LAUNCH:
		return dr_launch_on(a, st->l, st->s);
	case DR_STEP_MEMSET:
		return dr_memset_async(a, st->ctx, st->d, st->esize, st->fill, st->n, st->s);
	case DR_STEP_HTOD:
		return a->cuMemcpyHtoDAsync(st->d, st->host, st->n, st->s);
	case DR_STEP_DTOH:
		return a->cuMemcpyDtoHAsync(st->host, st->d, st->n, st->s);
	case DR_STEP_DTOD:
		return a->cuMemcpyDtoDAsync(st->d, st->src, st->n, st->s);
	case DR_STEP_RECORD:
		return a->cuEventRecord(st->e, st->s);
	case DR_STEP_WAIT:
		return a->cuStreamWaitEvent(st->s, st->e, 0);
	}
	return 1; // CUDA_ERROR_INVALID_VALUE
}

CUresult dr_submit(dr_api* a, const dr_step* steps, int n, struct dr_cupti* t, int* done, int* cupti_failed,
                   int* lib_status) {
	*done = 0;
	*cupti_failed = 0;
	*lib_status = 0;
	CUcontext cur = NULL;
	for (int i = 0; i < n; i++) {
		const dr_step* st = &steps[i];
		if (st->ctx != cur) {
			CUresult r = dr_ctx(a, st->ctx);
			if (r != DR_SUCCESS) {
				*done = i;
				return r;
			}
			cur = st->ctx;
		}
		int pushed = 0;
		if (t != NULL && st->op >= 0) {
			if (dr_cupti_push(t, (uint64_t)st->op) == DR_CUPTI_SUCCESS) {
				pushed = 1;
			} else {
				*cupti_failed = 1;
			}
		}
		CUresult r = step_call(a, st, lib_status);
		if (pushed && dr_cupti_pop(t) != DR_CUPTI_SUCCESS) {
			*cupti_failed = 1;
		}
		if (r != DR_SUCCESS) {
			*done = i;
			return r;
		}
	}
	*done = n;
	return DR_SUCCESS;
}
