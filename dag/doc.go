// Package dag describes GPU work as a graph of operations on buffers.
//
// A Builder collects buffers, kernels and operations (alloc, free, copy,
// fill, 2-D memset, kernel launch, host step, GEMM, stream task) in
// declaration order. Build validates them and infers the dependencies
// from the bytes each operation reads and writes: a read depends on the
// last earlier write of overlapping bytes (RAW), a write on that write and
// on every read of those bytes since (WAW, WAR).
// Disjoint byte ranges of one buffer never depend on each other; explicit
// After edges are added on top.
//
// Build also refuses an op that reads bytes nothing defined before it: no
// Init, no earlier write on the way to it, and the buffer not declared
// Uninitialized (an input the program writes itself). That catches a Copy
// with its arguments swapped and a chunked upload that misses a chunk.
//
// Build reports every problem in one round, dependency cycles included, as
// an ErrorList of *Error values in declaration order, each naming the
// buffer, kernel or op and the field that is wrong. Sizes, offsets and
// launch shapes are checked without wraparound. Inference costs O(log n)
// per access plus the edges it implies, in whatever order byte ranges are
// declared; the dependencies a graph implies are capped at MaxEdges.
//
// Buffers and ops are configured with options given to their
// constructors: BufferOption values (OnDevice, PinnedHost, Zeros, Data,
// ...) and OpOption values (Name, a Priority, OnDevice, Cost, After, and
// the options of one kind, such as AtMost for a While or Alpha for a Gemm).
//
// What each op kind is and does is its KindInfo (OpKind.Info), one entry
// of one table.
//
// The resulting Graph knows nothing of streams or devices' runtimes: package
// planner turns it into a Plan, and package executor runs that on a backend.
package dag
