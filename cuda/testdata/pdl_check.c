// pdl_check compares the values dagrun's binding of cuLaunchKernelEx
// declares by hand (cuda/cuda.h: dr_launch_attr, dr_launch_config) with
// the driver's real cuda.h. The Go test TestPDLBindingMatchesHeaders
// writes binding_values.h from the binding (one CHECK(expression, value)
// per value) and builds this file against the CUDA toolkit's cuda.h. It
// prints every comparison and exits 1 if any differs.
#include <stddef.h>
#include <stdio.h>

#include <cuda.h>

#include "binding_values.h"

int main(void) {
	int bad = 0;
#define CHECK(expr, want)                                                                                 \
	do {                                                                                                  \
		long long got_ = (long long)(expr);                                                               \
		if (got_ != (long long)(want)) {                                                                  \
			printf("MISMATCH %s: %lld in cuda.h, %lld in dagrun's binding\n", #expr, got_, (long long)(want)); \
			bad++;                                                                                        \
		} else {                                                                                          \
			printf("ok %s = %lld\n", #expr, got_);                                                        \
		}                                                                                                 \
	} while (0);
	BINDING_VALUES
	printf("cuda.h of CUDA %d\n", CUDA_VERSION);
	return bad ? 1 : 0;
}
