// What one iteration of a device loop costs by the kernel that ends it,
// no dagrun: WHILE nodes of 1000 iterations around k empty kernels, a
// count down and a kernel that sets the condition, replayed alternately,
// us per iteration. "raw" is the floor BENCHMARKS.md sets dagrun's loops
// beside (a count down that writes the flag, a kernel that reads it and
// sets the condition). The others copy dagrun's kernels (cuda/control.go):
// its condition kernel and its set_flag that sets the condition, each as
// it was (the count read after the flag was written: two trips to memory
// in turn) and as it is (the count loaded beside the flag or x). On an
// H200 (driver 580), k = 1: raw 5.59-5.60, set_flag as it was 5.84-5.85,
// as it is 5.15-5.63; k = 9: 9.65, 9.75, 9.10; k = 99: all within 0.6%.
// Build: nvcc -O3 -arch=native loopk.cu (scripts/gpu/loops.sh does).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
using clk = std::chrono::steady_clock;
struct loopState { unsigned long long count, overflow; };

__global__ void empty(const float* x) {}
__global__ void dec(int* n, int* flag) { int v = --n[0]; flag[0] = v > 0; }
__global__ void decf(float* n) { n[0] -= 1.0f; }
__global__ void set(cudaGraphConditionalHandle h, const int* flag) { cudaGraphSetConditional(h, *flag != 0); }

__device__ __forceinline__ void endOld(cudaGraphConditionalHandle h, int flag, loopState* loop, unsigned long long max, unsigned long long pause) {
  unsigned go = flag != 0; unsigned long long n = ++loop->count;
  if (go && max != 0 && n >= max) { loop->overflow = 1; go = 0; } else if (pause != 0 && n >= pause) go = 0;
  cudaGraphSetConditional(h, go);
}
__device__ __forceinline__ void endNew(cudaGraphConditionalHandle h, int flag, loopState* __restrict__ loop, unsigned long long n, unsigned long long max, unsigned long long pause) {
  unsigned go = flag != 0;
  if (go && max != 0 && n >= max) { loop->overflow = 1; go = 0; } else if (pause != 0 && n >= pause) go = 0;
  cudaGraphSetConditional(h, go);
}
__global__ void nextOld(cudaGraphConditionalHandle h, const int* flag, loopState* loop, unsigned long long max, unsigned long long pause) { endOld(h, *flag, loop, max, pause); }
__global__ void nextNew(cudaGraphConditionalHandle h, const int* __restrict__ flag, loopState* __restrict__ loop, unsigned long long max, unsigned long long pause) {
  unsigned long long n = loop->count + 1; int f = *flag; loop->count = n; endNew(h, f, loop, n, max, pause);
}
__global__ void setFlagOld(int* flag, long long nflag, const float* x, long long nx, double thr, cudaGraphConditionalHandle h, loopState* loop, unsigned long long max, unsigned long long pause) {
  int f = *flag; if (nx > 0) { f = ((double)x[0] > thr) ? 1 : 0; *flag = f; } endOld(h, f, loop, max, pause);
}
__global__ void setFlagNew(int* __restrict__ flag, long long nflag, const float* __restrict__ x, long long nx, double thr, cudaGraphConditionalHandle h, loopState* __restrict__ loop, unsigned long long max, unsigned long long pause) {
  unsigned long long n = loop->count + 1;
  int f = nx > 0 ? (((double)x[0] > thr) ? 1 : 0) : *flag;
  loop->count = n;
  if (nx > 0) *flag = f;
  endNew(h, f, loop, n, max, pause);
}

int main() {
  const int iters = 1000, reps = 12;
  float *x, *nf; int *n, *flag; loopState* loop;
  CK(cudaMalloc(&x, 4)); CK(cudaMalloc(&nf, 4)); CK(cudaMalloc(&n, 4)); CK(cudaMalloc(&flag, 4)); CK(cudaMalloc(&loop, sizeof(loopState)));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const char* names[] = {"raw", "condition kernel, was", "condition kernel, is", "set_flag, was", "set_flag, is"};
  const int nv = 5;
  for (int k : {1, 9, 99}) {
    std::vector<cudaGraphExec_t> ex(nv);
    for (int v = 0; v < nv; v++) {
      cudaGraph_t g; CK(cudaGraphCreate(&g, 0));
      cudaGraphConditionalHandle h; CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
      cudaGraphNodeParams cp = {}; cp.type = cudaGraphNodeTypeConditional;
      cp.conditional.handle = h; cp.conditional.type = cudaGraphCondTypeWhile; cp.conditional.size = 1;
      cudaGraphNode_t node; CK(cudaGraphAddNode(&node, g, NULL, NULL, 0, &cp));
      cudaGraph_t body = cp.conditional.phGraph_out[0];
      cudaGraphNode_t prev = NULL, nn; cudaKernelNodeParams kp = {}; kp.gridDim = dim3(1); kp.blockDim = dim3(1);
      auto add = [&](void* f, void** a) { kp.func = f; kp.kernelParams = a; CK(cudaGraphAddKernelNode(&nn, body, prev ? &prev : NULL, prev ? 1 : 0, &kp)); prev = nn; };
      for (int i = 0; i < k; i++) { void* a[] = {&x}; add((void*)empty, a); }
      long long one = 1; double thr = 0.5; unsigned long long zero = 0;
      void* decArgs[] = {&n, &flag}; void* decfArgs[] = {&nf};
      void* nextArgs[] = {&h, &flag, &loop, &zero, &zero};
      void* setArgs[] = {&flag, &one, &nf, &one, &thr, &h, &loop, &zero, &zero};
      void* rawArgs[] = {&h, &flag};
      switch (v) {
      case 0: add((void*)dec, decArgs); add((void*)set, rawArgs); break;
      case 1: add((void*)dec, decArgs); add((void*)nextOld, nextArgs); break;
      case 2: add((void*)dec, decArgs); add((void*)nextNew, nextArgs); break;
      case 3: add((void*)decf, decfArgs); add((void*)setFlagOld, setArgs); break;
      case 4: add((void*)decf, decfArgs); add((void*)setFlagNew, setArgs); break;
      }
      CK(cudaGraphInstantiate(&ex[v], g, 0)); CK(cudaGraphDestroy(g));
    }
    std::vector<std::vector<double>> t(nv);
    for (int r = 0; r < reps; r++) for (int v = 0; v < nv; v++) {
      int ni = iters, on = 1; float nfv = iters;
      CK(cudaMemcpy(n, &ni, 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(nf, &nfv, 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(flag, &on, 4, cudaMemcpyHostToDevice)); CK(cudaMemset(loop, 0, sizeof(loopState)));
      auto t0 = clk::now(); CK(cudaGraphLaunch(ex[v], s)); CK(cudaStreamSynchronize(s));
      if (r >= 2) t[v].push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / iters);
      loopState st; CK(cudaMemcpy(&st, loop, sizeof st, cudaMemcpyDeviceToHost));
      if (v > 0 && st.count != (unsigned long long)iters) { printf("k=%d %s: WRONG count %llu\n", k, names[v], st.count); return 1; }
    }
    for (int v = 0; v < nv; v++) {
      std::sort(t[v].begin(), t[v].end());
      printf("k=%d %-22s %.3f us/iter (%.3fx raw)\n", k, names[v], t[v][t[v].size() / 2], t[v][t[v].size() / 2] / t[0][t[0].size() / 2]);
    }
    for (auto e : ex) CK(cudaGraphExecDestroy(e));
  }
  return 0;
}
