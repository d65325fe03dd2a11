// cublaslt_check compares the values dagrun's cuBLASLt binding declares by
// hand (cuda/cublas.h) with the real headers. The Go test
// TestCuBLASLtBindingMatchesHeaders writes binding_values.h from the
// binding (one CHECK(expression, value) per value) and builds this file
// against the CUDA toolkit's cublasLt.h. It prints every comparison and
// exits 1 if any differs, 2 if the headers' cuBLAS major version is not
// one the binding supports.
#include <stddef.h>
#include <stdio.h>

#include <cublasLt.h>

#include "binding_values.h"

int main(void) {
	int bad = 0;
#define CHECK(expr, want)                                                                                    \
	do {                                                                                                     \
		long long got_ = (long long)(expr);                                                                  \
		if (got_ != (long long)(want)) {                                                                     \
			printf("MISMATCH %s: %lld in cublasLt.h, %lld in dagrun's binding\n", #expr, got_, (long long)(want)); \
			bad++;                                                                                           \
		} else {                                                                                             \
			printf("ok %s = %lld\n", #expr, got_);                                                           \
		}                                                                                                    \
	} while (0);
	BINDING_VALUES
	printf("cuBLAS headers %d.%d.%d\n", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
	if (bad) {
		return 1;
	}
	int major_ok = 0;
	SUPPORTED_MAJORS
	return major_ok ? 0 : 2;
}
