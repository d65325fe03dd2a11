// Proves that one stream capture can hold the work of 2 devices, including
// a grouped NCCL all-reduce (after an eager warm-up call, since NCCL
// connects lazily), and that the graph replays correctly. Run by
// TestCaptureProbe on the GPU machine; exit 77 means fewer than 2 devices.
//   gcc -I/usr/local/cuda/include capture_probe.c -o capture_probe \
//       -L/usr/local/cuda/lib64/stubs -lcuda -l:libnccl.so.2
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                 \
	do {                                                                                      \
		CUresult r_ = (x);                                                                    \
		if (r_ != CUDA_SUCCESS) {                                                             \
			const char* s_ = "?";                                                             \
			cuGetErrorName(r_, &s_);                                                          \
			fprintf(stderr, "capture_probe.c:%d: %s: %s (%d)\n", __LINE__, #x, s_, (int)r_); \
			exit(1);                                                                          \
		}                                                                                     \
	} while (0)
#define NK(x)                                                                                              \
	do {                                                                                                   \
		ncclResult_t r_ = (x);                                                                             \
		if (r_ != ncclSuccess) {                                                                           \
			fprintf(stderr, "capture_probe.c:%d: %s: %s (%d)\n", __LINE__, #x, ncclGetErrorString(r_), r_); \
			exit(1);                                                                                       \
		}                                                                                                  \
	} while (0)

enum { N = 1 << 20, REPLAYS = 3 };

static unsigned int bits(float f) {
	unsigned int u;
	memcpy(&u, &f, 4);
	return u;
}

static CUcontext ctx[2];
static CUstream st[2];
static CUdeviceptr x[2], y0;
static ncclComm_t comm[2];

static void allreduce(void) {
	NK(ncclGroupStart());
	for (int d = 0; d < 2; d++) {
		NK(ncclAllReduce((void*)x[d], (void*)x[d], N, ncclFloat32, ncclSum, comm[d], st[d]));
	}
	NK(ncclGroupEnd());
}

static int check(const char* what, CUcontext c, CUdeviceptr p, float want) {
	static float host[N];
	CK(cuCtxSetCurrent(c));
	CK(cuMemcpyDtoH(host, p, sizeof(host)));
	for (int i = 0; i < N; i++) {
		if (host[i] != want) {
			fprintf(stderr, "%s[%d] = %g, want %g\n", what, i, host[i], want);
			return 0;
		}
	}
	return 1;
}

int main(void) {
	setenv("NCCL_NVLS_ENABLE", "0", 1); // never NVLink multicast on the shared host
	CK(cuInit(0));
	int n = 0;
	CK(cuDeviceGetCount(&n));
	if (n < 2) {
		printf("skip: %d device(s), the probe needs 2\n", n);
		return 77;
	}
	for (int d = 0; d < 2; d++) {
		CUdevice dev;
		CK(cuDeviceGet(&dev, d));
		CK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
		CK(cuMemAlloc(&x[d], N * sizeof(float)));
	}
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuMemAlloc(&y0, N * sizeof(float)));
	CUevent fork, join;
	CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CK(cuCtxSetCurrent(ctx[1]));
	CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
	// Peer access both ways where the hardware allows, as dagrun's backend
	// enables it at open.
	for (int d = 0; d < 2; d++) {
		CUdevice me, peer;
		CK(cuDeviceGet(&me, d));
		CK(cuDeviceGet(&peer, 1 - d));
		int can = 0;
		CK(cuDeviceCanAccessPeer(&can, me, peer));
		if (can) {
			CK(cuCtxSetCurrent(ctx[d]));
			CUresult r = cuCtxEnablePeerAccess(ctx[1 - d], 0);
			if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
				CK(r);
			}
		}
	}
	int devs[2] = {0, 1};
	NK(ncclCommInitAll(comm, 2, devs));

	// Warm-up, eager: NCCL connects its peers at the first call.
	for (int d = 0; d < 2; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuMemsetD32Async(x[d], bits((float)(d + 1)), N, st[d]));
	}
	allreduce();
	for (int d = 0; d < 2; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuStreamSynchronize(st[d]));
	}
	if (!check("eager x0", ctx[0], x[0], 3) || !check("eager x1", ctx[1], x[1], 3)) {
		return 1;
	}

	// Capture: fork device 1's stream from device 0's origin stream, fill
	// both, all-reduce, join, then a peer copy of device 1's result.
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuStreamBeginCapture(st[0], CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(cuEventRecord(fork, st[0]));
	CK(cuCtxSetCurrent(ctx[1]));
	CK(cuStreamWaitEvent(st[1], fork, 0));
	CK(cuMemsetD32Async(x[1], bits(2), N, st[1]));
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuMemsetD32Async(x[0], bits(1), N, st[0]));
	allreduce();
	CK(cuCtxSetCurrent(ctx[1]));
	CK(cuEventRecord(join, st[1]));
	CK(cuCtxSetCurrent(ctx[0]));
	CK(cuStreamWaitEvent(st[0], join, 0));
	CK(cuMemcpyAsync(y0, x[1], N * sizeof(float), st[0])); // captured; cuMemcpyPeerAsync is not (peer_capture_probe.c)
	CUgraph g;
	CK(cuStreamEndCapture(st[0], &g));
	size_t nodes = 0;
	CK(cuGraphGetNodes(g, NULL, &nodes));
	CUgraphExec e;
	CK(cuGraphInstantiateWithFlags(&e, g, 0));

	for (int rep = 0; rep < REPLAYS; rep++) {
		// Clear everything eagerly so that only the replay can set it.
		for (int d = 0; d < 2; d++) {
			CK(cuCtxSetCurrent(ctx[d]));
			CK(cuMemsetD32(x[d], 0, N));
		}
		CK(cuCtxSetCurrent(ctx[0]));
		CK(cuMemsetD32(y0, 0, N));
		CK(cuCtxSynchronize());
		CK(cuGraphLaunch(e, st[0]));
		CK(cuStreamSynchronize(st[0]));
		if (!check("replayed x0", ctx[0], x[0], 3) || !check("replayed x1", ctx[1], x[1], 3) ||
		    !check("replayed y0 (peer copy of x1)", ctx[0], y0, 3)) {
			fprintf(stderr, "replay %d is wrong\n", rep);
			return 1;
		}
	}
	printf("ok: one capture across 2 devices (%zu nodes: fills, a grouped ncclAllReduce, a peer copy) replayed %d times correctly\n",
	       nodes, REPLAYS);
	CK(cuGraphExecDestroy(e));
	CK(cuGraphDestroy(g));
	for (int d = 0; d < 2; d++) {
		NK(ncclCommDestroy(comm[d]));
	}
	return 0;
}
