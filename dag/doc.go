// Package dag describes GPU work as a graph of operations on buffers.
//
// A Builder collects buffers, kernels and operations (alloc, free, copy,
// fill, kernel launch, host step, GEMM) in declaration order. Build validates them
// and infers the dependencies from the bytes each operation reads and writes:
// a read depends on the last earlier write of overlapping bytes (RAW), a
// write on that write and on every read of those bytes since (WAW, WAR).
// Disjoint byte ranges of one buffer never depend on each other; explicit
// After edges are added on top.
//
// The resulting Graph knows nothing of streams or devices' runtimes: package
// planner turns it into a Plan, and package executor runs that on a backend.
package dag
