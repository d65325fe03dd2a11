package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// The few cuBLAS entry points the example calls, declared by hand from
// cublas_api.h (no SDK headers at build time) and found with dlopen, as a
// program would bind any library it calls from a stream task.
typedef int (*cublas_create_fn)(void** handle);
typedef int (*cublas_destroy_fn)(void* handle);
typedef int (*cublas_set_stream_fn)(void* handle, void* stream);
typedef int (*cublas_sgemm_fn)(void* handle, int transa, int transb, int m, int n, int k,
                               const float* alpha, const float* A, int lda, const float* B, int ldb,
                               const float* beta, float* C, int ldc);

typedef struct {
	void* lib;
	void* handle;
	cublas_create_fn create;
	cublas_destroy_fn destroy;
	cublas_set_stream_fn set_stream;
	cublas_sgemm_fn sgemm;
} cublas;

enum { CUBLAS_OP_N = 0 };

// cublas_open loads the library at path and makes a handle: -1 when the
// library or a symbol is missing, else cublasCreate's status.
static int cublas_open(cublas* c, const char* path) {
	c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (c->lib == NULL) return -1;
	c->create = (cublas_create_fn)dlsym(c->lib, "cublasCreate_v2");
	c->destroy = (cublas_destroy_fn)dlsym(c->lib, "cublasDestroy_v2");
	c->set_stream = (cublas_set_stream_fn)dlsym(c->lib, "cublasSetStream_v2");
	c->sgemm = (cublas_sgemm_fn)dlsym(c->lib, "cublasSgemm_v2");
	if (!c->create || !c->destroy || !c->set_stream || !c->sgemm) {
		dlclose(c->lib);
		c->lib = NULL;
		return -1;
	}
	int r = c->create(&c->handle);
	if (r != 0) {
		dlclose(c->lib);
		c->lib = NULL;
	}
	return r;
}

static void cublas_close(cublas* c) {
	if (c->lib == NULL) return;
	c->destroy(c->handle);
	dlclose(c->lib);
	c->lib = NULL;
}

// cublas_sgemm_rowmajor enqueues C = A B on stream for row-major A (m x k),
// B (k x n) and C (m x n): cuBLAS is column-major, so it computes
// C^T = B^T A^T, which is the same memory.
static int cublas_sgemm_rowmajor(cublas* c, uintptr_t stream, int m, int n, int k,
                                 uintptr_t a, uintptr_t b, uintptr_t out) {
	int r = c->set_stream(c->handle, (void*)stream);
	if (r != 0) return r;
	const float one = 1, zero = 0;
	return c->sgemm(c->handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one,
	                (const float*)b, n, (const float*)a, k, &zero, (float*)out, n);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// cublasLib is a loaded cuBLAS with one handle, made before any run: a
// stream task allocates nothing of its own.
type cublasLib struct {
	c    C.cublas
	path string
}

// cublasCandidates: DAGRUN_CUBLAS (a file), then the sonames for the
// loader's path, then the CUDA and pip folders.
func cublasCandidates() []string {
	var out []string
	if p := os.Getenv("DAGRUN_CUBLAS"); p != "" {
		out = append(out, p)
	}
	for _, name := range []string{"libcublas.so.13", "libcublas.so.12"} {
		out = append(out, name,
			filepath.Join("/usr/local/cuda/lib64", name),
			filepath.Join("/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib", name))
	}
	return out
}

// openCublas loads cuBLAS and makes its handle, on the primary context of
// device 0 (the one dagrun's cuda backend uses).
func openCublas() (*cublasLib, error) {
	l := &cublasLib{}
	for _, p := range cublasCandidates() {
		cp := C.CString(p)
		r := C.cublas_open(&l.c, cp)
		C.free(unsafe.Pointer(cp))
		switch {
		case r == 0:
			l.path = p
			return l, nil
		case r > 0:
			return nil, fmt.Errorf("cublasCreate from %s: status %d", p, int(r))
		}
	}
	return nil, errors.New("libcublas.so.13 not found: install the CUDA toolkit or the nvidia-cublas pip package, or set DAGRUN_CUBLAS to libcublas's path (the cpu backend runs the example without it)")
}

func (l *cublasLib) Close() { C.cublas_close(&l.c) }

// sgemm is the stream task's function: it enqueues C = A B on the task's
// stream, over the views' device addresses (A, B, C in access order).
func (l *cublasLib) sgemm(m, n, k int) dag.TaskFunc {
	return func(_ context.Context, on dag.TaskStream) error {
		a, b, c := on.Addrs[0], on.Addrs[1], on.Addrs[2]
		if r := C.cublas_sgemm_rowmajor(&l.c, C.uintptr_t(on.Handle), C.int(m), C.int(n), C.int(k),
			C.uintptr_t(a), C.uintptr_t(b), C.uintptr_t(c)); r != 0 {
			return fmt.Errorf("cublasSgemm: status %d", int(r))
		}
		return nil
	}
}
