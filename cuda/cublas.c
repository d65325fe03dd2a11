#include <dlfcn.h>
#include <string.h>

#include "cublas.h"

typedef struct {
	size_t offset;
	const char* name;
} dr_lt_sym;

#define LTSYM(f) {offsetof(dr_lt, f), #f}

static const dr_lt_sym dr_lt_syms[] = {
	LTSYM(cublasLtCreate),
	LTSYM(cublasLtDestroy),
	LTSYM(cublasLtGetStatusName),
	LTSYM(cublasLtGetStatusString),
	LTSYM(cublasLtGetVersion),
	LTSYM(cublasLtMatmulDescCreate),
	LTSYM(cublasLtMatmulDescDestroy),
	LTSYM(cublasLtMatmulDescSetAttribute),
	LTSYM(cublasLtMatmulDescGetAttribute),
	LTSYM(cublasLtMatrixLayoutCreate),
	LTSYM(cublasLtMatrixLayoutDestroy),
	LTSYM(cublasLtMatrixLayoutSetAttribute),
	LTSYM(cublasLtMatmulPreferenceCreate),
	LTSYM(cublasLtMatmulPreferenceDestroy),
	LTSYM(cublasLtMatmulPreferenceSetAttribute),
	LTSYM(cublasLtMatmulAlgoGetHeuristic),
	LTSYM(cublasLtMatmul),
};

int dr_lt_load(dr_lt* l, const char* path, const char** missing) {
	memset(l, 0, sizeof(*l));
	l->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (l->lib == NULL) {
		*missing = dlerror();
		return -1;
	}
	for (size_t i = 0; i < sizeof(dr_lt_syms) / sizeof(dr_lt_syms[0]); i++) {
		void* p = dlsym(l->lib, dr_lt_syms[i].name);
		if (p == NULL) {
			*missing = dr_lt_syms[i].name;
			dlclose(l->lib);
			l->lib = NULL;
			return 1;
		}
		memcpy((char*)l + dr_lt_syms[i].offset, &p, sizeof(p));
	}
	return 0;
}

void dr_lt_unload(dr_lt* l) {
	if (l->lib != NULL) {
		dlclose(l->lib);
	}
	memset(l, 0, sizeof(*l));
}

cublasStatus_t dr_lt_create(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t* h, CUresult* cu) {
	*cu = dr_ctx(a, c);
	if (*cu != DR_SUCCESS) return DR_CUBLAS_STATUS_SUCCESS;
	return l->cublasLtCreate(h);
}

cublasStatus_t dr_lt_destroy(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t h, CUresult* cu) {
	*cu = dr_ctx(a, c);
	if (*cu != DR_SUCCESS) return DR_CUBLAS_STATUS_SUCCESS;
	return l->cublasLtDestroy(h);
}

#define STEP(name, call)           \
	do {                           \
		*step = name;              \
		cublasStatus_t st_ = call; \
		if (st_ != 0) return st_;  \
	} while (0)

static cublasStatus_t dr_layout(dr_lt* l, cublasLtMatrixLayout_t* out, int type, uint64_t rows, uint64_t cols, int64_t ld,
                                int32_t batch, int64_t stride, const char** step) {
	STEP("cublasLtMatrixLayoutCreate", l->cublasLtMatrixLayoutCreate(out, type, rows, cols, ld));
	int32_t order = DR_LT_ORDER_COL;
	STEP("cublasLtMatrixLayoutSetAttribute(ORDER)",
	     l->cublasLtMatrixLayoutSetAttribute(*out, DR_LT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
	STEP("cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)",
	     l->cublasLtMatrixLayoutSetAttribute(*out, DR_LT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
	STEP("cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)",
	     l->cublasLtMatrixLayoutSetAttribute(*out, DR_LT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
	return DR_CUBLAS_STATUS_SUCCESS;
}

// dr_gemm_setup leaves whatever it made in g for dr_gemm_teardown, even
// when it fails.
cublasStatus_t dr_gemm_setup(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t h, dr_gemm* g, const dr_gemm_shape* s, int pick,
                             const char** step, CUresult* cu) {
	*step = "cuCtxSetCurrent";
	*cu = dr_ctx(a, c);
	if (*cu != DR_SUCCESS) return DR_CUBLAS_STATUS_SUCCESS;
	*step = "dr_gemm_setup (no cublasLtCreate handle for the device)";
	if (h == NULL) return DR_CUBLAS_STATUS_NOT_INITIALIZED;
	g->handle = h;
	g->f64 = s->scaleType == DR_CUDA_R_64F;
	g->alpha64 = s->alpha;
	g->beta64 = s->beta;
	g->alpha32 = (float)s->alpha;
	g->beta32 = (float)s->beta;
	g->hasBias = 0;
	g->bias = 0;
	STEP("cublasLtMatmulDescCreate", l->cublasLtMatmulDescCreate(&g->desc, s->computeType, s->scaleType));
	int32_t tx = s->transx, ty = s->transy;
	STEP("cublasLtMatmulDescSetAttribute(TRANSA)",
	     l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_TRANSA, &tx, sizeof(tx)));
	STEP("cublasLtMatmulDescSetAttribute(TRANSB)",
	     l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_TRANSB, &ty, sizeof(ty)));
	if (s->smCountTarget > 0) {
		int32_t sms = s->smCountTarget;
		STEP("cublasLtMatmulDescSetAttribute(SM_COUNT_TARGET)",
		     l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
	}
	if (s->epilogue != 0 && s->epilogue != DR_LT_EPILOGUE_DEFAULT) {
		uint32_t epi = s->epilogue;
		STEP("cublasLtMatmulDescSetAttribute(EPILOGUE)",
		     l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
		g->hasBias = (epi & DR_LT_EPILOGUE_BIAS) != 0;
		if (g->hasBias && s->bias != 0) {
			CUdeviceptr bias = s->bias;
			STEP("cublasLtMatmulDescSetAttribute(BIAS_POINTER)",
			     l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
			g->bias = bias;
		}
	}
	cublasStatus_t st;
	if ((st = dr_layout(l, &g->lx, s->dataType, s->xrows, s->xcols, s->ldx, s->batch, s->stridex, step)) != 0) return st;
	if ((st = dr_layout(l, &g->ly, s->dataType, s->yrows, s->ycols, s->ldy, s->batch, s->stridey, step)) != 0) return st;
	if ((st = dr_layout(l, &g->lc, s->dataType, s->m, s->n, s->ldc, s->batch, s->stridec, step)) != 0) return st;
	if (!pick) {
		return DR_CUBLAS_STATUS_SUCCESS;
	}
	cublasLtMatmulPreference_t pref = NULL;
	STEP("cublasLtMatmulPreferenceCreate", l->cublasLtMatmulPreferenceCreate(&pref));
	uint64_t ws = s->maxWorkspace;
	uint32_t al[4] = {s->alignx, s->aligny, s->alignc, s->alignd};
	int attrs[4] = {DR_LT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, DR_LT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
	                DR_LT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, DR_LT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
	*step = "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)";
	st = l->cublasLtMatmulPreferenceSetAttribute(pref, DR_LT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
	for (int i = 0; i < 4 && st == 0; i++) {
		*step = "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)";
		st = l->cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &al[i], sizeof(al[i]));
	}
	if (st == 0) {
		dr_lt_heuristic h;
		memset(&h, 0, sizeof(h));
		int found = 0;
		*step = "cublasLtMatmulAlgoGetHeuristic";
		st = l->cublasLtMatmulAlgoGetHeuristic(g->handle, g->desc, g->lx, g->ly, g->lc, g->lc, pref, 1, &h, &found);
		if (st == 0 && found < 1) {
			st = -1; // no algorithm: reported by the caller
		} else if (st == 0) {
			g->algo = h.algo;
			g->workspaceSize = h.workspaceSize;
		}
	}
	l->cublasLtMatmulPreferenceDestroy(pref);
	return st;
}

cublasStatus_t dr_gemm_desc_get(dr_lt* l, dr_gemm* g, int attr, void* buf, size_t size, size_t* written) {
	return l->cublasLtMatmulDescGetAttribute(g->desc, attr, buf, size, written);
}

void dr_gemm_teardown(dr_lt* l, dr_gemm* g) {
	if (g->lx != NULL) l->cublasLtMatrixLayoutDestroy(g->lx);
	if (g->ly != NULL) l->cublasLtMatrixLayoutDestroy(g->ly);
	if (g->lc != NULL) l->cublasLtMatrixLayoutDestroy(g->lc);
	if (g->desc != NULL) l->cublasLtMatmulDescDestroy(g->desc);
	g->lx = g->ly = g->lc = NULL;
	g->desc = NULL;
}

// dr_gemm_call enqueues one product; a bias epilogue's pointer is an
// attribute of the descriptor, set again where this call's differs (a
// temporary's address changes from run to run). The call reads it when
// it enqueues, so a captured graph keeps the address of its capture.
static cublasStatus_t dr_gemm_call(dr_lt* l, dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr cc, CUdeviceptr d,
                                   CUdeviceptr bias, CUstream s) {
	if (g->hasBias && bias != g->bias) {
		cublasStatus_t st = l->cublasLtMatmulDescSetAttribute(g->desc, DR_LT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
		if (st != 0) return st;
		g->bias = bias;
	}
	const void* alpha = g->f64 ? (const void*)&g->alpha64 : (const void*)&g->alpha32;
	const void* beta = g->f64 ? (const void*)&g->beta64 : (const void*)&g->beta32;
	return l->cublasLtMatmul(g->handle, g->desc, alpha, (const void*)x, g->lx, (const void*)y, g->ly, beta, (const void*)cc,
	                         g->lc, (void*)d, g->lc, &g->algo, (void*)g->workspace, g->workspaceSize, s);
}

int dr_gemm_enqueue(struct dr_lt* l, struct dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr c, CUdeviceptr d,
                    CUdeviceptr bias, CUstream s) {
	return dr_gemm_call(l, g, x, y, c, d, bias, s);
}

cublasStatus_t dr_gemm_run(dr_lt* l, dr_api* a, CUcontext c, dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr cc,
                           CUdeviceptr d, CUdeviceptr bias, CUstream s, CUresult* cu) {
	*cu = dr_ctx(a, c);
	if (*cu != DR_SUCCESS) return DR_CUBLAS_STATUS_SUCCESS;
	return dr_gemm_call(l, g, x, y, cc, d, bias, s);
}

cublasStatus_t dr_gemm_raw(dr_lt* l, dr_api* a, CUcontext c, dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr cc,
                           CUdeviceptr d, CUdeviceptr bias, CUstream s, int n, CUresult* cu) {
	*cu = dr_ctx(a, c);
	if (*cu != DR_SUCCESS) return DR_CUBLAS_STATUS_SUCCESS;
	for (int i = 0; i < n; i++) {
		cublasStatus_t st = dr_gemm_call(l, g, x, y, cc, d, bias, s);
		if (st != 0) return st;
	}
	return DR_CUBLAS_STATUS_SUCCESS;
}
