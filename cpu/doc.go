// Package cpu is the CPU backend of dagrun: it runs plans where no GPU is
// present and serves as the oracle the CUDA backend is tested against.
//
// A Backend satisfies executor.Backend and executor.Timer. Streams are
// in-order queues of instructions; a pool of worker goroutines (Workers,
// by default GOMAXPROCS) runs them, always taking the runnable stream of
// highest priority first, so priorities matter whenever streams compete
// for workers. Events are latches with a generation per record, so one
// plan can run many times. Device and host memory alike are byte slices:
// persistent buffers are made at Open with their initial contents,
// temporary ones by Alloc ops and dropped by Free ops. Kernels are the
// builtin library of package dag written as Go functions; a kernel written
// in CUDA is refused at Open. GEMM ops run on gonum's BLAS (f16 and bf16
// through f32).
//
// Delays injects a seeded random pause before every op; tests use it to
// show that results never depend on timing.
package cpu
