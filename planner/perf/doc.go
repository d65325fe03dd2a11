// Package perf prices a plan's ops and simulates plans.
//
// A CostModel estimates each op's device time, and its Overheads what
// submitting ops, records and waits cost (DefaultOverheads are measured on
// an H100). Simulate runs a plan under a cost model for an eager run (the
// host submits every step one after another) or a graph replay; a plan's
// estimated makespan is that simulation. All cost arithmetic saturates, so
// absurd costs cannot reorder a plan. Ops that fill their device (Fills)
// hold its multiprocessors one at a time.
//
// A PerfModel is a CostModel of measurements: ops' durations by signature
// (Signature; copies of unmeasured sizes from a fitted bandwidth, a
// collective's per world size) and the device's overheads, learned
// weighted toward short runs. It lives in a versioned file per device
// (LoadPerfModel, Save), which dagrun run --perf-model teaches.
package perf
