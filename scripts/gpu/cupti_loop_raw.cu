// A traced device loop by hand, no dagrun: a WHILE node of 10 empty kernels
// and a step kernel that sets the condition, 1000 iterations, untraced and
// then traced as cuda/loopsample.go traces an eager loop: a graph that
// stops after 16 iterations launched with CUPTI's kernel records on, then
// a graph that resumes the loop launched with them off. It prints us per
// iteration, the host's cost of switching records off and on, and the
// records taken (8 runs: 1 + 16 x 11 each), switching more of the kinds
// dagrun enables, then with its other CUPTI settings on. On an H200
// (driver 580, CUPTI 2025.3): untraced 9.29 us, sampled 10.2-10.8 us,
// records switched in 3-19 us, 1416 records each time.
// Build: nvcc -O3 -arch=native -I/usr/local/cuda/extras/CUPTI/include
// cupti_loop_raw.cu -lcupti -lcuda (scripts/gpu/loops.sh does).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CP(x) do { CUptiResult e = (x); if (e != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(e, &s); printf("%s:%d %s\n", __FILE__, __LINE__, s); exit(1);} } while (0)
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

static long kernels = 0;
static void CUPTIAPI req(uint8_t** b, size_t* size, size_t* max) { *size = 8 << 20; *b = (uint8_t*)aligned_alloc(8, *size); *max = 0; }
static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = NULL;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels++;
  free(b);
}
static void CUPTIAPI cb(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

__global__ void empty(float* x) { if (threadIdx.x == 1000) x[0] = 1; }
// step counts down and sets the condition; with sample, it stops the loop
// after that many iterations of this launch, the count left for a resume.
__global__ void step(int* n, int* done, int sample, cudaGraphConditionalHandle h) {
  int v = --n[0]; int d = ++done[0];
  cudaGraphSetConditional(h, v > 0 && (sample == 0 || d < sample));
}
__global__ void enter(int* n, int* done, cudaGraphConditionalHandle h) { done[0] = 0; cudaGraphSetConditional(h, n[0] > 0); }

static cudaGraphExec_t inst(float* x, int* n, int* done, int k, int sample) {
  cudaGraph_t g; CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h; CK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
  cudaGraphNode_t node; cudaKernelNodeParams kp = {}; kp.gridDim = dim3(1); kp.blockDim = dim3(1);
  void* ea[] = {&n, &done, &h}; kp.func = (void*)enter; kp.kernelParams = ea;
  CK(cudaGraphAddKernelNode(&node, g, NULL, 0, &kp));
  cudaGraphNodeParams cp = {}; cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h; cp.conditional.type = cudaGraphCondTypeWhile; cp.conditional.size = 1;
  cudaGraphNode_t prev = node; CK(cudaGraphAddNode(&node, g, &prev, NULL, 1, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  cudaGraphNode_t bp = NULL, bn;
  for (int i = 0; i < k; i++) { void* a[] = {&x}; kp.func = (void*)empty; kp.kernelParams = a; CK(cudaGraphAddKernelNode(&bn, body, bp ? &bp : NULL, bp ? 1 : 0, &kp)); bp = bn; }
  void* sa[] = {&n, &done, &sample, &h}; kp.func = (void*)step; kp.kernelParams = sa;
  CK(cudaGraphAddKernelNode(&bn, body, bp ? &bp : NULL, bp ? 1 : 0, &kp));
  cudaGraphExec_t e; CK(cudaGraphInstantiate(&e, g, 0)); cudaGraphDestroy(g); return e;
}

int main() {
  const int iters = 1000, reps = 7, k = 10;
  float* x; int* n; int* done;
  CK(cudaMalloc(&x, 4)); CK(cudaMalloc(&n, 4)); CK(cudaMalloc(&done, 4));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<CUpti_ActivityKind> toggled = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  auto sw = [&](bool on) { for (auto kd : toggled) { if (on) CP(cuptiActivityEnable(kd)); else CP(cuptiActivityDisable(kd)); } };
  auto plainT = [&](cudaGraphExec_t e) {
    std::vector<double> v;
    for (int r = 0; r < reps + 1; r++) {
      CK(cudaMemcpy(n, &iters, 4, cudaMemcpyHostToDevice));
      auto t0 = clk::now(); CK(cudaGraphLaunch(e, s)); CK(cudaStreamSynchronize(s));
      if (r) v.push_back(us(t0, clk::now()) / iters);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2];
  };
  cudaGraphExec_t plain = inst(x, n, done, k, 0);
  plainT(plain);
  printf("untraced, before CUPTI: %.2f us/iter\n", plainT(plain));
  CP(cuptiActivityRegisterCallbacks(req, completed));
  auto G = [&](const char* what) {
    sw(true);
    cudaGraphExec_t samp = inst(x, n, done, k, 16), rest = inst(x, n, done, k, 0);
    std::vector<double> v, off, on;
    for (int r = 0; r < reps + 1; r++) {
      CK(cudaMemcpy(n, &iters, 4, cudaMemcpyHostToDevice));
      auto t0 = clk::now();
      CK(cudaGraphLaunch(samp, s));
      auto t1 = clk::now(); sw(false); auto t2 = clk::now();
      CK(cudaGraphLaunch(rest, s));
      auto t3 = clk::now(); sw(true); auto t4 = clk::now();
      CK(cudaStreamSynchronize(s));
      if (r) { v.push_back(us(t0, clk::now()) / iters); off.push_back(us(t1, t2)); on.push_back(us(t3, t4)); }
    }
    std::sort(v.begin(), v.end()); std::sort(off.begin(), off.end()); std::sort(on.begin(), on.end());
    CP(cuptiActivityFlushAll(1));
    printf("%-60s %.2f us/iter; disable %.1f us, enable %.1f us; %ld kernel records\n", what, v[v.size() / 2], off[off.size() / 2], on[on.size() / 2], kernels);
    kernels = 0;
    cudaGraphExecDestroy(samp); cudaGraphExecDestroy(rest);
  };
  G("kernel records toggled");
  toggled = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY2};
  G("kernel, memcpy, memset, memcpy2 toggled");
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL));
  G("+ memory pool records on");
  CUpti_SubscriberHandle sub; CP(cuptiSubscribe(&sub, cb, NULL));
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
  G("+ graph node callbacks");
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  G("+ driver callbacks on launches");
  toggled = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  G("kernel records toggled alone again");
  return 0;
}
