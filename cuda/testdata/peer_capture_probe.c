// Which driver call captures a copy between two devices, with peer access
// and without, for memory from cuMemAlloc and from a device's memory pool;
// each captured graph is replayed and its result checked. Run by
// TestPeerCaptureProbe on the 2-GPU machine; exit 77 means fewer than 2
// devices. It prints one line per case: "case: ok" or "case: <error>".
//   gcc -I/usr/local/cuda/include peer_capture_probe.c -o peer_capture_probe \
//       -L/usr/local/cuda/lib64/stubs -lcuda
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                    \
	do {                                                                                         \
		CUresult r_ = (x);                                                                       \
		if (r_ != CUDA_SUCCESS) {                                                                \
			const char* s_ = "?";                                                                \
			cuGetErrorName(r_, &s_);                                                             \
			fprintf(stderr, "peer_capture_probe.c:%d: %s: %s (%d)\n", __LINE__, #x, s_, (int)r_); \
			exit(1);                                                                             \
		}                                                                                        \
	} while (0)

enum { N = 1 << 20 };

static CUcontext ctx[2];
static CUstream st[2];
static CUevent fork_[2], join_[2]; // per device: an event is recorded only by its own context's streams

static const char* name(CUresult r) {
	const char* s = "?";
	cuGetErrorName(r, &s);
	return s;
}

static CUresult copy(int method, CUdeviceptr dst, int dd, CUdeviceptr src, int sd, size_t n, CUstream s) {
	switch (method) {
	case 0:
		return cuMemcpyPeerAsync(dst, ctx[dd], src, ctx[sd], n, s);
	case 1:
		return cuMemcpyAsync(dst, src, n, s);
	default:
		return cuMemcpyDtoDAsync(dst, src, n, s);
	}
}

static const char* methods[] = {"cuMemcpyPeerAsync", "cuMemcpyAsync", "cuMemcpyDtoDAsync"};

// one captures, on device dd's stream, a fill of src on device sd's stream
// and then the copy dst <- src, replays it twice and checks dst.
static void one(const char* what, int method, CUdeviceptr dst, int dd, CUdeviceptr src, int sd) {
	static unsigned int host[N];
	unsigned int want = 0x3f800000u + (unsigned)method * 7 + (unsigned)dd;
	CUresult r;
	CUgraph g = NULL;
	CUgraphExec e = NULL;
	CK(cuCtxSetCurrent(ctx[dd]));
	CK(cuStreamBeginCapture(st[dd], CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(cuEventRecord(fork_[dd], st[dd]));
	CK(cuCtxSetCurrent(ctx[sd]));
	CK(cuStreamWaitEvent(st[sd], fork_[dd], 0));
	CK(cuMemsetD32Async(src, want, N, st[sd]));
	CK(cuEventRecord(join_[sd], st[sd]));
	CK(cuCtxSetCurrent(ctx[dd]));
	CK(cuStreamWaitEvent(st[dd], join_[sd], 0));
	r = copy(method, dst, dd, src, sd, N * 4, st[dd]);
	CUresult re = cuStreamEndCapture(st[dd], &g);
	if (r != CUDA_SUCCESS || re != CUDA_SUCCESS) {
		printf("%s %s: capture: %s / end %s\n", what, methods[method], name(r), name(re));
		if (g) cuGraphDestroy(g);
		return;
	}
	if ((r = cuGraphInstantiateWithFlags(&e, g, 0)) != CUDA_SUCCESS) {
		printf("%s %s: instantiate: %s\n", what, methods[method], name(r));
		cuGraphDestroy(g);
		return;
	}
	for (int rep = 0; rep < 2; rep++) {
		CK(cuCtxSetCurrent(ctx[sd]));
		CK(cuMemsetD32(src, 0, N));
		CK(cuCtxSetCurrent(ctx[dd]));
		CK(cuMemsetD32(dst, 0, N));
		CK(cuCtxSynchronize());
		if ((r = cuGraphLaunch(e, st[dd])) != CUDA_SUCCESS || (r = cuStreamSynchronize(st[dd])) != CUDA_SUCCESS) {
			printf("%s %s: replay: %s\n", what, methods[method], name(r));
			exit(1);
		}
		CK(cuMemcpyDtoH(host, dst, sizeof(host)));
		for (int i = 0; i < N; i++) {
			if (host[i] != want) {
				printf("%s %s: replay %d WRONG: [%d] = %#x, want %#x\n", what, methods[method], rep, i, host[i], want);
				goto out;
			}
		}
	}
	printf("%s %s: ok\n", what, methods[method]);
out:
	cuGraphExecDestroy(e);
	cuGraphDestroy(g);
}

static double eager(int method, CUdeviceptr dst, CUdeviceptr src, size_t n, int reps) {
	CUevent a, b;
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuEventCreate(&a, 0));
	CK(cuEventCreate(&b, 0));
	CK(copy(method, dst, 0, src, 1, n, st[0]));
	CK(cuEventRecord(a, st[0]));
	for (int i = 0; i < reps; i++) CK(copy(method, dst, 0, src, 1, n, st[0]));
	CK(cuEventRecord(b, st[0]));
	CK(cuEventSynchronize(b));
	float ms;
	CK(cuEventElapsedTime(&ms, a, b));
	return (double)n * reps / (ms * 1e-3) / 1e9;
}

int main(void) {
	CK(cuInit(0));
	int n = 0;
	CK(cuDeviceGetCount(&n));
	if (n < 2) {
		printf("skip: %d device(s), the probe needs 2\n", n);
		return 77;
	}
	CUdevice dev[2];
	CUdeviceptr x[2], pool[2];
	for (int d = 0; d < 2; d++) {
		CK(cuDeviceGet(&dev[d], d));
		CK(cuDevicePrimaryCtxRetain(&ctx[d], dev[d]));
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
		CK(cuMemAlloc(&x[d], N * 4));
	}
	for (int d = 0; d < 2; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuEventCreate(&fork_[d], CU_EVENT_DISABLE_TIMING));
		CK(cuEventCreate(&join_[d], CU_EVENT_DISABLE_TIMING));
	}
	int can01 = 0, can10 = 0;
	CK(cuDeviceCanAccessPeer(&can01, dev[0], dev[1]));
	CK(cuDeviceCanAccessPeer(&can10, dev[1], dev[0]));
	printf("can access peer: 0->1 %d, 1->0 %d\n", can01, can10);

	// Without peer access first (it cannot be taken back for pool memory).
	for (int m = 0; m < 3; m++) {
		one("no-peer 1->0 cuMemAlloc", m, x[0], 0, x[1], 1);
		one("no-peer 0->1 cuMemAlloc", m, x[1], 1, x[0], 0);
	}
	for (int d = 0; d < 2; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CUresult r = cuCtxEnablePeerAccess(ctx[1 - d], 0);
		if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CK(r);
	}
	for (int d = 0; d < 2; d++) {
		CUmemoryPool p;
		CK(cuDeviceGetDefaultMemPool(&p, dev[d]));
		CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, 1 - d}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuMemPoolSetAccess(p, &a, 1));
		CK(cuMemAllocAsync(&pool[d], N * 4, st[d]));
		CK(cuStreamSynchronize(st[d]));
	}
	for (int m = 0; m < 3; m++) {
		one("peer 1->0 cuMemAlloc", m, x[0], 0, x[1], 1);
		one("peer 0->1 cuMemAlloc", m, x[1], 1, x[0], 0);
		one("peer 1->0 pool", m, pool[0], 0, pool[1], 1);
		one("peer 0->1 pool", m, pool[1], 1, pool[0], 0);
	}
	CUdeviceptr big[2];
	size_t bn = (size_t)256 << 20;
	for (int d = 0; d < 2; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuMemAlloc(&big[d], bn));
	}
	for (int k = 0; k < 2; k++) {
		printf("eager 256MiB 1->0: cuMemcpyPeerAsync %.1f GB/s, cuMemcpyAsync %.1f GB/s\n", eager(0, big[0], big[1], bn, 20),
		       eager(1, big[0], big[1], bn, 20));
	}
	return 0;
}
