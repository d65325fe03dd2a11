// Programmatic dependent launch by hand, with the CUDA runtime and no
// dagrun: a chain of 1,000 dependent axpy kernels (16 bytes a thread,
// blocks of 256) at 64 KiB, 1 MiB, 16 MiB and 64 MiB (16 to 16,384
// blocks), replayed as a graph and
// launched eagerly, us per kernel. Two kernel bodies: "min" (one vector
// a thread, no loop) and "dag" (dagrun's builtin: an i64 grid-stride loop,
// the alignment test and the scalar tail); three orders of the device-side
// calls: wait then trigger (dagrun's), trigger then wait, wait only.
// scripts/gpu/pdl.sh builds it with nvcc and runs it beside BenchmarkPDL:
// it tells what PDL can give on this machine from what dagrun gets.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
typedef long long i64;
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

template <int ORDER> __device__ __forceinline__ void pdl() {
  if (ORDER == 0) { asm volatile("griddepcontrol.wait;" ::: "memory"); asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
  else if (ORDER == 1) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); asm volatile("griddepcontrol.wait;" ::: "memory"); }
  else { asm volatile("griddepcontrol.wait;" ::: "memory"); }
}
template <int ORDER> __global__ void axpy_min(float* y, const float* x, int nv, float a) {
  pdl<ORDER>();
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nv) { float4 u = ((const float4*)x)[k], v = ((float4*)y)[k];
    v.x = __fadd_rn(v.x, __fmul_rn(a, u.x)); v.y = __fadd_rn(v.y, __fmul_rn(a, u.y)); v.z = __fadd_rn(v.z, __fmul_rn(a, u.z)); v.w = __fadd_rn(v.w, __fmul_rn(a, u.w));
    ((float4*)y)[k] = v; }
}
__device__ __forceinline__ i64 tid() { unsigned bt = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  i64 block = blockIdx.x + (i64)gridDim.x * (blockIdx.y + (i64)gridDim.y * blockIdx.z); return block * (blockDim.x*blockDim.y*blockDim.z) + bt; }
__device__ __forceinline__ i64 nth() { return (i64)gridDim.x * gridDim.y * gridDim.z * (blockDim.x*blockDim.y*blockDim.z); }
template <int ORDER> __global__ void axpy_dag(float* y, i64 ny, const float* x, i64 nx, float a) {
  pdl<ORDER>();
  i64 n = ny < nx ? ny : nx; i64 done = 0;
  if ((((unsigned long long)y | (unsigned long long)x) & 15) == 0) {
    i64 nv = n / 4;
    for (i64 k = tid(); k < nv; k += nth()) { uint4 va = ((const uint4*)y)[k], vb = ((const uint4*)x)[k], out;
      for (int j = 0; j < 4; j++) ((float*)&out)[j] = __fadd_rn(((float*)&va)[j], __fmul_rn(a, ((float*)&vb)[j]));
      ((uint4*)y)[k] = out; }
    done = nv * 4;
  }
  for (i64 i = done + tid(); i < n; i += nth()) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

static void launch(cudaStream_t s, void* fn, int blocks, bool pdlOn, void** args) {
  cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(256); cfg.stream = s;
  if (pdlOn) { at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1; cfg.attrs = at; cfg.numAttrs = 1; }
  CK(cudaLaunchKernelExC(&cfg, fn, args));
}

int main() {
  const int N = 1000;
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  size_t sizes[] = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
  const char* names[] = {"64KiB", "1MiB", "16MiB", "64MiB"};
  for (int si = 0; si < 4; si++) {
    size_t bytes = sizes[si]; float *x, *y; CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&y, bytes));
    CK(cudaMemset(x, 0, bytes)); CK(cudaMemset(y, 0, bytes));
    int nv = bytes / 16, blocks = (nv + 255) / 256; i64 n = bytes / 4; float a = 0.5f;
    void* fns[2][3] = {{(void*)axpy_min<0>, (void*)axpy_min<1>, (void*)axpy_min<2>}, {(void*)axpy_dag<0>, (void*)axpy_dag<1>, (void*)axpy_dag<2>}};
    const char* kn[2] = {"min", "dag"}; const char* on[3] = {"wait-trig", "trig-wait", "wait-only"};
    for (int k = 0; k < 2; k++) for (int o = 0; o < 3; o++) for (int p = 0; p < 2; p++) {
      if (o > 0 && p == 0) continue;
      void* amin[] = {&y, &x, &nv, &a}; void* adag[] = {&y, &n, &x, &n, &a};
      void** args = k == 0 ? amin : adag;
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < N; i++) launch(s, fns[k][o], blocks, p && i > 0, args);
      CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
      for (int w = 0; w < 3; w++) CK(cudaGraphLaunch(ge, s));
      CK(cudaStreamSynchronize(s));
      float best = 1e30;
      for (int r = 0; r < 5; r++) { CK(cudaEventRecord(e0, s)); for (int w = 0; w < 4; w++) CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (ms < best) best = ms; }
      printf("replay %s %s %s %s: %.3f us/kernel\n", names[si], kn[k], on[o], p ? "pdl" : "plain", best * 1000 / (4 * N));
      best = 1e30;
      for (int r = 0; r < 5; r++) { CK(cudaStreamSynchronize(s)); CK(cudaEventRecord(e0, s));
        for (int i = 0; i < N; i++) launch(s, fns[k][o], blocks, p && i > 0, args);
        CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (ms < best) best = ms; }
      printf("eager  %s %s %s %s: %.3f us/kernel\n", names[si], kn[k], on[o], p ? "pdl" : "plain", best * 1000 / N);
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
    CK(cudaFree(x)); CK(cudaFree(y));
  }
  return 0;
}
