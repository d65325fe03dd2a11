// Programmatic edges of a graph built by hand, no dagrun: a chain of
// 1,000 dependent axpy kernels (one vector a thread, blocks of 256) at
// 64 KiB and 1 MiB, replayed, us per kernel, against the same chain with
// plain edges: the programmatic port (what a capture with programmatic
// stream serialization makes, and dagrun's captures), the launch
// completion port (the dependent starts once every block of the
// producer has started), and the device-side orders. It asks whether an
// edge dagrun does not make would reach what PDL is asked for at 64 KiB
// (0.7x): on an H200 (driver 580) the best was 0.78x, by either port
// with the trigger first, and the launch completion port cost 1.15-1.17x
// at 1 MiB. scripts/gpu/pdl.sh builds and runs it.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
template <int ORDER> __device__ __forceinline__ void pdl() {
  if (ORDER == 0) { asm volatile("griddepcontrol.wait;" ::: "memory"); asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
  else if (ORDER == 1) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); asm volatile("griddepcontrol.wait;" ::: "memory"); }
  else if (ORDER == 2) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
}
template <int ORDER> __global__ void axpy(float* y, const float* x, int nv, float a) {
  pdl<ORDER>();
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nv) { float4 u = ((const float4*)x)[k], v = ((float4*)y)[k];
    v.x = v.x + a * u.x; v.y = v.y + a * u.y; v.z = v.z + a * u.z; v.w = v.w + a * u.w; ((float4*)y)[k] = v; }
}
int main() {
  const int n = 1000, reps = 15;
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t bytes : {(size_t)64 << 10, (size_t)1 << 20}) {
    int nv = bytes / 16; dim3 grid((nv + 255) / 256), block(256);
    float *x, *y; CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&y, bytes)); CK(cudaMemset(x, 0, bytes)); CK(cudaMemset(y, 0, bytes));
    float a = 0.5f;
    const char* names[] = {"plain", "edge programmatic", "edge launch-completion", "edge launch-completion, trigger first", "capture PSS", "edge programmatic, trigger first", "edge launch-completion, wait only"};
    const int nvar = 7;
    std::vector<cudaGraphExec_t> ex(nvar);
    for (int v = 0; v < nvar; v++) {
      cudaGraph_t g;
      void* f = (v == 3 || v == 5) ? (void*)axpy<1> : v == 6 ? (void*)axpy<2> : (void*)axpy<0>;
      void* args[] = {&y, &x, &nv, &a};
      if (v == 4) {
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < n; i++) {
          cudaLaunchConfig_t cfg = {}; cfg.gridDim = grid; cfg.blockDim = block; cfg.stream = s;
          cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = at; cfg.numAttrs = i ? 1 : 0;
          CK(cudaLaunchKernelExC(&cfg, f, args));
        }
        CK(cudaStreamEndCapture(s, &g));
      } else {
        CK(cudaGraphCreate(&g, 0));
        cudaGraphNode_t prev = NULL, node;
        for (int i = 0; i < n; i++) {
          cudaGraphNodeParams np = {}; np.type = cudaGraphNodeTypeKernel;
          np.kernel.func = f; np.kernel.gridDim = grid; np.kernel.blockDim = block; np.kernel.kernelParams = args;
          cudaGraphEdgeData ed = {};
          if (v == 1 || v == 5) { ed.type = cudaGraphDependencyTypeProgrammatic; ed.from_port = cudaGraphKernelNodePortProgrammatic; }
          if (v == 2 || v == 3 || v == 6) { ed.type = cudaGraphDependencyTypeProgrammatic; ed.from_port = cudaGraphKernelNodePortLaunchCompletion; }
          CK(cudaGraphAddNode(&node, g, prev ? &prev : NULL, prev ? &ed : NULL, prev ? 1 : 0, &np));
          prev = node;
        }
      }
      CK(cudaGraphInstantiate(&ex[v], g, 0)); CK(cudaGraphDestroy(g));
    }
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<std::vector<float>> t(nvar);
    for (int r = 0; r < reps + 2; r++) for (int v = 0; v < nvar; v++) {
      CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(ex[v], s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 2) t[v].push_back(ms * 1000 / n);
    }
    for (int v = 0; v < nvar; v++) { std::sort(t[v].begin(), t[v].end()); float m = t[v][reps / 2];
      printf("%7zu KiB %-40s %.3f us/kernel (%.3fx plain)\n", bytes >> 10, names[v], m, m / t[0][reps / 2]); }
    for (auto ge : ex) CK(cudaGraphExecDestroy(ge));
    CK(cudaFree(x)); CK(cudaFree(y));
  }
}
