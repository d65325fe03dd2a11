// Package cpu is the CPU backend of dagrun: it runs plans where no GPU is
// present and is the oracle the CUDA backend is tested against.
//
// A Backend (New, or the zero value) holds its options and the sessions
// open on it. A Session holds one graph's memory, streams, events,
// captured graphs and worker goroutines of its own, so sessions on one
// backend run side by side. Streams are in-order queues that the workers
// run, the ready stream of highest priority first; events are latches with
// a generation per record; memory is byte slices. Kernels are dag's
// builtin library written in Go (a kernel in CUDA C is refused at Open),
// GEMMs run on gonum's BLAS, and captures record the submission and replay
// it with the semantics of CUDA stream capture. Collectives go through the
// world a session joins, or a world of one rank.
//
// Delays injects a seeded random pause before every op; tests use it to
// show that results never depend on timing.
package cpu
