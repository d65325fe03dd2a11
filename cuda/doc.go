// Package cuda runs dagrun plans on NVIDIA GPUs through the CUDA driver API.
//
// The driver (libcuda.so.1) and NVRTC (libnvrtc.so.13 or .12) are loaded
// with dlopen at run time and called through hand-declared prototypes, so
// the package builds with cgo but without the CUDA SDK; where no driver is
// found, New reports an error matching ErrNoDriver.
//
// A Backend implements the executor's Backend and Timer interfaces. It
// uses each device's primary context. CUDA's current context belongs to an
// OS thread and goroutines move between threads, so every C wrapper first
// makes the right context current on the thread it runs on (one
// cuCtxGetCurrent, a thread-local read, when nothing changes) and then
// makes its driver call: each driver call costs one cgo call, and a
// Backend works from whichever goroutine calls it (one at a time).
//
// Streams are created non-blocking, with dag priorities mapped onto the
// device's range (see StreamPriority). Temporary device buffers come from
// the device's default memory pool in stream order (cuMemAllocAsync and
// cuMemFreeAsync); persistent ones from cuMemAlloc; pinned host buffers
// from cuMemHostAlloc; pageable ones from the C heap, never Go memory.
// Copies and fills that involve only host memory, and host steps, run in
// stream order through cuLaunchHostFunc. Builtin kernels (dag.Builtins) are
// compiled from CUDA C with NVRTC for the device's architecture and cached
// on disk by content hash. GEMM ops run on cuBLASLt (libcublasLt.so.13,
// found like NVRTC or through DAGRUN_CUBLASLT), loaded at the first Open
// that needs it; each GEMM's algorithm is picked at Open, once per
// signature, whatever stream it lands on (see cublas.go).
//
// A Backend also captures plans as CUDA graphs (it implements the
// executor's Capturer): by stream capture in relaxed mode on an origin
// stream, with every other stream forked from it and joined back with an
// event, so that capture runs the same submission code as eager runs.
// Temporaries become memory nodes, host steps host nodes, and kernel nodes
// keep their streams' priorities. Updates go through cuGraphExecUpdate and
// fall back to a fresh instantiation when the driver refuses them (graphs
// with memory nodes, or changed topology); GraphStats counts both.
package cuda
