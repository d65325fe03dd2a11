// Package cpu is the CPU backend of dagrun: it runs plans where no GPU is
// present and serves as the oracle the CUDA backend is tested against.
//
// A Backend (cpu.New, or the zero value) implements device.Backend: it
// holds only its options and the sessions open on it. Each Session
// (device.Session, device.Timer, device.Capturer and device.Writer) holds
// one graph's memory, streams, events, captured graphs and its own worker
// goroutines, so sessions on one backend run side by side, each from its
// own goroutine; Backend.Close closes those left open.
//
// Within a session, streams are in-order queues of instructions; a pool of
// worker goroutines (Workers, by default GOMAXPROCS) runs them, always
// taking the runnable stream of highest priority first, so priorities
// matter whenever streams compete for workers. Events are
// latches with a generation per record, so one plan can run many times.
// Device and host memory alike are byte slices: persistent buffers are
// made at Open with their initial contents, temporary ones by Alloc ops and
// dropped by Free ops. What each op kind does is one entry of the kinds
// table. Kernels are the builtin library of package dag written
// as Go functions; a kernel written in CUDA is refused at
// Open. GEMM ops run on gonum's BLAS (f16 and bf16 through f32). Captures record the submission and replay it, with
// the semantics of CUDA stream capture.
//
// Collectives run through the session's world: Join makes
// the session a rank whose collectives go through a device.Collectives
// (internal/comm, in one process or over TCP); a session that never joins
// is the one rank of a world of 1.
//
// Delays injects a seeded random pause before every op; tests use it to
// show that results never depend on timing.
package cpu
