// The floor of a `dagrun run` on the GPU: a process that
// initialises the driver, creates the primary context, loads one module
// and runs one kernel. Built and timed by coldstart.sh.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s = "?"; cuGetErrorString(r, &s); fprintf(stderr, "%s -> %s\n", #x, s); return 1; } } while (0)
int main(int argc, char** argv) {
	if (argc != 2) { fprintf(stderr, "usage: coldstart KERNEL.ptx\n"); return 2; }
	CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction f; CUstream s;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoad(&mod, argv[1]));
	CK(cuModuleGetFunction(&f, mod, "empty_k"));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CK(cuStreamSynchronize(s));
	CK(cuStreamDestroy(s));
	CK(cuModuleUnload(mod));
	CK(cuDevicePrimaryCtxRelease(dev));
	return 0;
}
