// What the driver does with conditional nodes, and what a loop costs
// there by hand: the raw floor of dagrun's loops. Run by
// TestConditionalProbe on the GPU machine.
//
// It takes the conditional-node entry points by the very symbols dagrun's
// backend loads (cuda.c), checks the CUgraphNodeParams layout dagrun
// declares against the toolkit's header, lowers a WHILE loop the way the
// backend does inside a stream capture (a handle, a kernel that sets it,
// the node after it, the body captured into the node's graph from a
// second stream) and replays it, then times a loop of 1000 iterations
// around a body of K empty kernels (K = 1, 9, 99) and a count down
// three ways: a WHILE node (whose body's last kernel sets the condition:
// K+2 kernels, as a dagrun while ending in set_flag), the same body
// unrolled in one graph, and a host-driven loop (launch the body, read
// the flag back, launch again). Lines:
//   "layout: ok", "capture while: ok", "capture if/else: ok",
//   "K=<k> while_us=<t> unrolled_us=<t> host_us=<t>" (per iteration).
//   gcc -I/usr/local/cuda/include cond_probe.c -o cond_probe \
//       -L/usr/local/cuda/lib64 -lnvrtc -L/usr/local/cuda/lib64/stubs -lcuda -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                              \
	do {                                                                                   \
		CUresult r_ = (x);                                                                 \
		if (r_ != CUDA_SUCCESS) {                                                          \
			const char* s_ = "?";                                                          \
			cuGetErrorName(r_, &s_);                                                       \
			fprintf(stderr, "cond_probe.c:%d: %s: %s (%d)\n", __LINE__, #x, s_, (int)r_); \
			exit(1);                                                                       \
		}                                                                                  \
	} while (0)

// dagrun's declaration of CUgraphNodeParams's conditional arm (cuda.c).
typedef struct {
	int type;
	int reserved0[3];
	union {
		long long reserved1[29];
		struct {
			uint64_t handle;
			int type;
			unsigned int size;
			CUgraph* phGraph_out;
			CUcontext ctx;
		} cond;
	} u;
	long long reserved2;
} dr_node_params;

// The entry points, by the symbols dagrun loads.
static CUresult (*getCaptureInfo)(CUstream, int*, uint64_t*, CUgraph*, const CUgraphNode**, size_t*);
static CUresult (*updateCaptureDependencies)(CUstream, CUgraphNode*, size_t, unsigned int);
static CUresult (*beginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode*, const void*, size_t, int);
static CUresult (*handleCreate)(uint64_t*, CUgraph, CUcontext, unsigned int, unsigned int);
static CUresult (*addNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, void*);

static const char* src =
    "typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;\n"
    "extern \"C\" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);\n"
    "extern \"C\" __global__ void empty() {}\n"
    "extern \"C\" __global__ void dec(int* n, int* flag) { int v = --n[0]; flag[0] = v > 0; }\n"
    "extern \"C\" __global__ void set(cudaGraphConditionalHandle h, const int* flag) { cudaGraphSetConditional(h, *flag != 0); }\n"
    "extern \"C\" __global__ void add(int* x, int v) { x[0] += v; }\n";

static CUcontext ctx;
static CUstream st, body;
static CUfunction fEmpty, fDec, fSet, fAdd;
static CUdeviceptr dn, dflag, dx;

static void* sym(void* lib, const char* name) {
	void* p = dlsym(lib, name);
	if (p == NULL) {
		fprintf(stderr, "libcuda has no %s\n", name);
		exit(77);
	}
	return p;
}

static void compile(void) {
	nvrtcProgram p;
	if (nvrtcCreateProgram(&p, src, "cond_probe.cu", 0, NULL, NULL) != NVRTC_SUCCESS) exit(2);
	const char* opts[] = {"--gpu-architecture=compute_90"};
	nvrtcResult r = nvrtcCompileProgram(p, 1, opts);
	if (r != NVRTC_SUCCESS) {
		size_t n;
		nvrtcGetProgramLogSize(p, &n);
		char* log = malloc(n + 1);
		nvrtcGetProgramLog(p, log);
		fprintf(stderr, "nvrtc: %s\n%s\n", nvrtcGetErrorString(r), log);
		exit(1);
	}
	size_t n;
	nvrtcGetPTXSize(p, &n);
	char* ptx = malloc(n);
	nvrtcGetPTX(p, ptx);
	CUmodule m;
	CK(cuModuleLoadData(&m, ptx));
	CK(cuModuleGetFunction(&fEmpty, m, "empty"));
	CK(cuModuleGetFunction(&fDec, m, "dec"));
	CK(cuModuleGetFunction(&fSet, m, "set"));
	CK(cuModuleGetFunction(&fAdd, m, "add"));
}

static void launch(CUfunction f, void** args, CUstream s) { CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)); }

static void setInt(CUdeviceptr p, int v) { CK(cuMemcpyHtoD(p, &v, 4)); }

static int getInt(CUdeviceptr p) {
	int v;
	CK(cuMemcpyDtoH(&v, p, 4));
	return v;
}

// condNode adds a conditional node after what s captured so far, as
// dagrun's dr_cond_node does.
static void condNode(CUstream s, uint64_t h, int type, int size, CUgraph* bodies) {
	int status;
	uint64_t id;
	CUgraph g;
	const CUgraphNode* deps;
	size_t n;
	CK(getCaptureInfo(s, &status, &id, &g, &deps, &n));
	dr_node_params p;
	memset(&p, 0, sizeof(p));
	p.type = 13;
	p.u.cond.handle = h;
	p.u.cond.type = type;
	p.u.cond.size = (unsigned)size;
	p.u.cond.ctx = ctx;
	CUgraphNode node;
	CK(addNode(&node, g, deps, n, &p));
	for (int i = 0; i < size; i++) bodies[i] = p.u.cond.phGraph_out[i];
	CK(updateCaptureDependencies(s, &node, 1, 1));
}

static uint64_t handleOf(CUstream s) {
	int status;
	uint64_t id, h;
	CUgraph g;
	const CUgraphNode* deps;
	size_t n;
	CK(getCaptureInfo(s, &status, &id, &g, &deps, &n));
	if (status != 1) {
		fprintf(stderr, "stream is not capturing\n");
		exit(1);
	}
	CK(handleCreate(&h, g, ctx, 0, 0));
	return h;
}

// captureWhile captures, on st, a while loop whose body (captured from
// the body stream) is k empty kernels and dec, and sets the condition again.
static CUgraphExec captureWhile(int k) {
	CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED));
	uint64_t h = handleOf(st);
	void* setArgs[] = {&h, &dflag};
	launch(fSet, setArgs, st);
	CUgraph b[1];
	condNode(st, h, 1, 1, b);
	CK(beginCaptureToGraph(body, b[0], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
	for (int i = 0; i < k; i++) launch(fEmpty, NULL, body);
	void* decArgs[] = {&dn, &dflag};
	launch(fDec, decArgs, body);
	launch(fSet, setArgs, body);
	CUgraph got;
	CK(cuStreamEndCapture(body, &got));
	CUgraph g;
	CK(cuStreamEndCapture(st, &g));
	CUgraphExec e;
	CK(cuGraphInstantiate(&e, g, 0));
	return e;
}

static double elapsed_us(CUevent a, CUevent b) {
	float ms;
	CK(cuEventElapsedTime(&ms, a, b));
	return ms * 1000.0;
}

int main(void) {
	CK(cuInit(0));
	int count = 0;
	CK(cuDeviceGetCount(&count));
	if (count < 1) return 77;
	void* lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (lib == NULL) return 77;
	getCaptureInfo = sym(lib, "cuStreamGetCaptureInfo_v2");
	updateCaptureDependencies = sym(lib, "cuStreamUpdateCaptureDependencies");
	beginCaptureToGraph = sym(lib, "cuStreamBeginCaptureToGraph");
	handleCreate = sym(lib, "cuGraphConditionalHandleCreate");
	addNode = sym(lib, "cuGraphAddNode");

	// The layout dagrun declares, against the header's.
	int bad = sizeof(dr_node_params) != sizeof(CUgraphNodeParams) ||
	          offsetof(dr_node_params, u.cond.handle) != offsetof(CUgraphNodeParams, conditional.handle) ||
	          offsetof(dr_node_params, u.cond.type) != offsetof(CUgraphNodeParams, conditional.type) ||
	          offsetof(dr_node_params, u.cond.size) != offsetof(CUgraphNodeParams, conditional.size) ||
	          offsetof(dr_node_params, u.cond.phGraph_out) != offsetof(CUgraphNodeParams, conditional.phGraph_out) ||
	          offsetof(dr_node_params, u.cond.ctx) != offsetof(CUgraphNodeParams, conditional.ctx) ||
	          CU_GRAPH_NODE_TYPE_CONDITIONAL != 13 || CU_GRAPH_COND_TYPE_WHILE != 1 || CU_GRAPH_COND_TYPE_IF != 0;
	printf("layout: %s\n", bad ? "WRONG" : "ok");

	CUdevice dev;
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&body, CU_STREAM_NON_BLOCKING));
	CK(cuMemAlloc(&dn, 4));
	CK(cuMemAlloc(&dflag, 4));
	CK(cuMemAlloc(&dx, 4));
	compile();

	// A captured while, replayed twice: 7 iterations, then 0 (flag clear).
	CUgraphExec e = captureWhile(2);
	setInt(dn, 7);
	setInt(dflag, 1);
	CK(cuGraphLaunch(e, st));
	CK(cuStreamSynchronize(st));
	int n1 = getInt(dn);
	setInt(dn, 5);
	setInt(dflag, 0);
	CK(cuGraphLaunch(e, st));
	CK(cuStreamSynchronize(st));
	int n2 = getInt(dn);
	printf("capture while: %s (n %d, want 0; then %d, want 5)\n", n1 == 0 && n2 == 5 ? "ok" : "WRONG", n1, n2);
	CK(cuGraphExecDestroy(e));

	// A captured if/else: x += 1 when the flag is set, x += 10 otherwise.
	CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED));
	uint64_t h = handleOf(st);
	void* setArgs[] = {&h, &dflag};
	launch(fSet, setArgs, st);
	CUgraph b[2];
	condNode(st, h, 0, 2, b);
	int one = 1, ten = 10;
	for (int i = 0; i < 2; i++) {
		CK(beginCaptureToGraph(body, b[i], NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
		void* args[] = {&dx, i == 0 ? (void*)&one : (void*)&ten};
		launch(fAdd, args, body);
		CUgraph got;
		CK(cuStreamEndCapture(body, &got));
	}
	CUgraph g;
	CK(cuStreamEndCapture(st, &g));
	CK(cuGraphInstantiate(&e, g, 0));
	setInt(dx, 0);
	setInt(dflag, 1);
	CK(cuGraphLaunch(e, st));
	CK(cuStreamSynchronize(st));
	setInt(dflag, 0);
	CK(cuGraphLaunch(e, st));
	CK(cuStreamSynchronize(st));
	int x = getInt(dx);
	printf("capture if/else: %s (x %d, want 11)\n", x == 11 ? "ok" : "WRONG", x);
	CK(cuGraphExecDestroy(e));

	// The floors: 1000 iterations of k empty kernels and dec.
	enum { ITER = 1000, UNROLL = 100, HOST = 200, REPS = 5 };
	CUevent t0, t1;
	CK(cuEventCreate(&t0, 0));
	CK(cuEventCreate(&t1, 0));
	int ks[] = {1, 9, 99};
	for (int ki = 0; ki < 3; ki++) {
		int k = ks[ki];
		double best[3] = {1e30, 1e30, 1e30};
		CUgraphExec loop = captureWhile(k);
		// unrolled: UNROLL iterations of the body in one graph
		CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED));
		void* decArgs[] = {&dn, &dflag};
		for (int it = 0; it < UNROLL; it++) {
			for (int i = 0; i < k; i++) launch(fEmpty, NULL, st);
			launch(fDec, decArgs, st);
		}
		CUgraph ug;
		CK(cuStreamEndCapture(st, &ug));
		CUgraphExec unrolled;
		CK(cuGraphInstantiate(&unrolled, ug, 0));
		// the host loop's body, as one graph
		CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED));
		for (int i = 0; i < k; i++) launch(fEmpty, NULL, st);
		launch(fDec, decArgs, st);
		CUgraph bg;
		CK(cuStreamEndCapture(st, &bg));
		CUgraphExec once;
		CK(cuGraphInstantiate(&once, bg, 0));
		for (int rep = 0; rep <= REPS; rep++) { // rep 0 warms up
			setInt(dn, ITER);
			setInt(dflag, 1);
			CK(cuEventRecord(t0, st));
			CK(cuGraphLaunch(loop, st));
			CK(cuEventRecord(t1, st));
			CK(cuEventSynchronize(t1));
			if (getInt(dn) != 0) {
				printf("K=%d while: WRONG (n %d)\n", k, getInt(dn));
			}
			double w = elapsed_us(t0, t1) / ITER;
			setInt(dn, 1 << 30);
			CK(cuEventRecord(t0, st));
			CK(cuGraphLaunch(unrolled, st));
			CK(cuEventRecord(t1, st));
			CK(cuEventSynchronize(t1));
			double u = elapsed_us(t0, t1) / UNROLL;
			setInt(dn, HOST);
			int flag = 1, iters = 0;
			CK(cuEventRecord(t0, st));
			while (flag) {
				CK(cuGraphLaunch(once, st));
				CK(cuMemcpyDtoHAsync(&flag, dflag, 4, st));
				CK(cuStreamSynchronize(st));
				iters++;
			}
			CK(cuEventRecord(t1, st));
			CK(cuEventSynchronize(t1));
			double hl = elapsed_us(t0, t1) / iters;
			if (rep > 0) {
				if (w < best[0]) best[0] = w;
				if (u < best[1]) best[1] = u;
				if (hl < best[2]) best[2] = hl;
			}
		}
		printf("K=%d while_us=%.2f unrolled_us=%.2f host_us=%.2f\n", k, best[0], best[1], best[2]);
		CK(cuGraphExecDestroy(loop));
		CK(cuGraphExecDestroy(unrolled));
		CK(cuGraphExecDestroy(once));
	}
	return 0;
}
