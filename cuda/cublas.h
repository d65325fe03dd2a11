// Hand-declared subset of cuBLASLt, loaded with dlopen at run time: dagrun
// builds without the CUDA SDK. Values and layouts are copied from
// cublasLt.h, cublas_api.h and library_types.h of CUDA 13.0 (cuBLAS 13.1);
// cuda/testdata/cublaslt_check.c checks each against the real headers.
#ifndef DAGRUN_CUBLAS_H
#define DAGRUN_CUBLAS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda.h"

typedef int cublasStatus_t;
typedef struct cublasLtContext* cublasLtHandle_t;
typedef void* cublasLtMatmulDesc_t;       // cublasLtMatmulDescOpaque_t*
typedef void* cublasLtMatrixLayout_t;     // cublasLtMatrixLayoutOpaque_t*
typedef void* cublasLtMatmulPreference_t; // cublasLtMatmulPreferenceOpaque_t*

// cublasLtMatmulAlgo_t
typedef struct {
	uint64_t data[8];
} dr_lt_algo;

// cublasLtMatmulHeuristicResult_t
typedef struct {
	dr_lt_algo algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} dr_lt_heuristic;

enum {
	DR_CUBLAS_STATUS_SUCCESS = 0,
	DR_CUBLAS_STATUS_NOT_INITIALIZED = 1, // what cuBLASLt answers a NULL handle with
	DR_CUBLAS_STATUS_NOT_SUPPORTED = 15,  // no heuristic for the configuration: an epilogue runs unfused
	DR_CUBLAS_OP_N = 0,
	DR_CUBLAS_OP_T = 1,
	// cublasComputeType_t
	DR_CUBLAS_COMPUTE_32F = 68,
	DR_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
	DR_CUBLAS_COMPUTE_64F = 70,
	// cudaDataType_t
	DR_CUDA_R_32F = 0,
	DR_CUDA_R_64F = 1,
	DR_CUDA_R_16F = 2,
	DR_CUDA_R_16BF = 14,
	// cublasLtMatmulDescAttributes_t (int32_t values)
	DR_LT_MATMUL_DESC_TRANSA = 3,
	DR_LT_MATMUL_DESC_TRANSB = 4,
	DR_LT_MATMUL_DESC_EPILOGUE = 7,     // uint32_t, a cublasLtEpilogue_t
	// const void*; the bias's type is D's (BIAS_DATA_TYPE left at -1). The
	// heuristic reads only its value, for the alignment to expect.
	DR_LT_MATMUL_DESC_BIAS_POINTER = 8,
	// int32_t: the SMs the heuristic tunes for, fewer than the device's
	// when a kernel beside the GEMM holds the others; 0: the device's.
	DR_LT_MATMUL_DESC_SM_COUNT_TARGET = 15,
	// cublasLtEpilogue_t (cublasLt.h): the bias is one element per row of
	// the column-major D, length m, added before the activation; GELU is
	// the tanh form.
	DR_LT_EPILOGUE_DEFAULT = 1,
	DR_LT_EPILOGUE_RELU = 2,
	DR_LT_EPILOGUE_BIAS = 4,
	DR_LT_EPILOGUE_RELU_BIAS = 6,
	DR_LT_EPILOGUE_GELU = 32,
	DR_LT_EPILOGUE_GELU_BIAS = 36,
	// cublasLtMatrixLayoutAttribute_t
	DR_LT_MATRIX_LAYOUT_ORDER = 1,
	DR_LT_MATRIX_LAYOUT_BATCH_COUNT = 5,          // int32_t
	DR_LT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6, // int64_t
	DR_LT_ORDER_COL = 0,
	// cublasLtMatmulPreferenceAttributes_t
	DR_LT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, // uint64_t
	DR_LT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, // uint32_t, and B, C, D after it
	DR_LT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	DR_LT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	DR_LT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

typedef struct dr_lt {
	void* lib;
	cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t*);
	cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t);
	const char* (*cublasLtGetStatusName)(cublasStatus_t);
	const char* (*cublasLtGetStatusString)(cublasStatus_t);
	size_t (*cublasLtGetVersion)(void);
	cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t*, int, int);
	cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
	cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int, const void*, size_t);
	cublasStatus_t (*cublasLtMatmulDescGetAttribute)(cublasLtMatmulDesc_t, int, void*, size_t, size_t*);
	cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t*, int, uint64_t, uint64_t, int64_t);
	cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
	cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t, int, const void*, size_t);
	cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t*);
	cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
	cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int, const void*, size_t);
	cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
	                                                 cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	                                                 cublasLtMatmulPreference_t, int, dr_lt_heuristic*, int*);
	cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
	                                 const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t,
	                                 void*, cublasLtMatrixLayout_t, const dr_lt_algo*, void*, size_t, CUstream);
} dr_lt;

int dr_lt_load(dr_lt* l, const char* path, const char** missing);
void dr_lt_unload(dr_lt* l);

// dr_gemm is one GEMM ready to run: row-major operands mapped onto
// cuBLASLt's column-major ones (x = B, y = A; see cublas.go), with its
// algorithm and workspace chosen once.
typedef struct dr_gemm {
	cublasLtHandle_t handle;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t lx, ly, lc; // lc serves C and D
	dr_lt_algo algo;
	CUdeviceptr workspace;
	size_t workspaceSize;
	int f64; // alpha and beta are doubles (f64 GEMMs), else floats
	double alpha64, beta64;
	float alpha32, beta32;
	// With a bias epilogue: the bias pointer desc holds, set again before
	// a call with another (0 before the first).
	int hasBias;
	CUdeviceptr bias;
} dr_gemm;

// Shape of a GEMM in cuBLASLt's column-major terms.
typedef struct {
	int computeType, scaleType, dataType;
	int transx, transy;
	uint64_t m, n, k;                 // D is m x n, op(x) m x k, op(y) k x n
	uint64_t xrows, xcols, yrows, ycols; // stored (column-major) shapes
	int64_t ldx, ldy, ldc;
	int32_t batch;
	int64_t stridex, stridey, stridec;
	uint32_t alignx, aligny, alignc, alignd;
	uint64_t maxWorkspace;
	uint32_t epilogue; // a cublasLtEpilogue_t, DR_LT_EPILOGUE_DEFAULT for none
	// A bias epilogue's BIAS_POINTER for the heuristic, which takes the
	// alignment to expect of the bias from it: a value aligned as every
	// bias the GEMM will be called with is, and no more.
	CUdeviceptr bias;
	double alpha, beta; // the scale factors, stored in g as the scale type takes them
	int32_t smCountTarget; // SM_COUNT_TARGET, or 0 to leave it unset
} dr_gemm_shape;

// dr_gemm_setup makes g ready to run with handle h (cublasLtCreate's, on
// context c): g->handle, alpha and beta, its descriptors for shape s and,
// when pick is set, the heuristic's best algorithm in g->algo and
// g->workspaceSize. Everything cublasLtMatmul reads is set here, so that
// no path to a call can leave a part of it out. A NULL h is refused as
// cuBLASLt would refuse it (CUBLAS_STATUS_NOT_INITIALIZED) before any call.
// *step names the call that failed.
cublasStatus_t dr_gemm_setup(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t h, dr_gemm* g, const dr_gemm_shape* s, int pick,
                             const char** step, CUresult* cu);
// dr_gemm_desc_get reads attribute attr of g's matmul descriptor into buf
// (size bytes; with size 0 and buf NULL, *written is the size cuBLASLt
// keeps it in): the GPU tests' check of what setup set.
cublasStatus_t dr_gemm_desc_get(dr_lt* l, dr_gemm* g, int attr, void* buf, size_t size, size_t* written);
void dr_gemm_teardown(dr_lt* l, dr_gemm* g);
cublasStatus_t dr_lt_create(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t* h, CUresult* cu);
cublasStatus_t dr_lt_destroy(dr_lt* l, dr_api* a, CUcontext c, cublasLtHandle_t h, CUresult* cu);
// dr_gemm_run enqueues D = epilogue(alpha op(x) op(y) + beta C [+ bias])
// on s; bias is ignored without a bias epilogue.
cublasStatus_t dr_gemm_run(dr_lt* l, dr_api* a, CUcontext c, dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr cc,
                           CUdeviceptr d, CUdeviceptr bias, CUstream s, CUresult* cu);
// dr_gemm_raw enqueues the same call n times, straight from C: the floor of
// the benchmarks.
cublasStatus_t dr_gemm_raw(dr_lt* l, dr_api* a, CUcontext c, dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr cc,
                           CUdeviceptr d, CUdeviceptr bias, CUstream s, int n, CUresult* cu);

#endif
