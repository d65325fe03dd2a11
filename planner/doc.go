// Package planner schedules a dag.Graph onto streams.
//
// New assigns every op to an in-order stream of its device, priority and
// kind (compute, or a copy stream per direction), spreading independent
// work over at most Options.Streams compute streams (MaxStreams at most).
// The order in which ops are placed is the Options.Strategy: by default
// list scheduling (among the ops whose dependencies are placed, the one that
// can start earliest on its best stream, ties to the longest path to the end
// of the graph, then the higher priority, then declaration order), so the
// plan does not depend on the order the user declared the work in; where
// that plan is more than 1% above a lower bound (on graphs of up to 16,384
// ops), it also tries a lookahead and declaration order and keeps the
// shortest estimate. DeclarationOrder
// keeps the planner's first strategy for comparison, and Best always plans
// every ordering and keeps the shortest estimate. Each op goes on the stream
// of its pool where it starts earliest counting what its waits cost, and
// continues a dependency's chain where that costs nothing. Kinds that must
// keep their declaration order (collectives) keep it under every strategy.
// Kernels and GEMMs large enough to fill their device (from
// Options.SMs) hold its multiprocessors one at a time, in placement and in
// the estimate: a pipeline of large GEMMs stays on one compute stream
// instead of two streams that would only share the device.
//
// A plan for a replay (Options.Mode Replay) also tries halving the stream
// budget down to one stream and keeps the plan with the fewest streams
// within 1% of the shortest estimate: a replayed graph starts a device's
// concurrent branches one after another (Overheads.ReplayBranch, 1.5 us
// apart as measured), so short kernels spread over many streams lose more
// than they overlap.
//
// Dependencies across streams become an event recorded after the producer
// and a wait before the consumer; a wait that earlier waits already imply
// (tracked with vector clocks over streams) is left out. Temporary buffers
// are allocated and freed by ordinary ops, so a free waits for every user on
// every stream. MemoryOf gives each memory's peak of temporaries and their
// packed arena; for temporaries from a stream-ordered pool, which counts an
// allocation from its submission, Options.PoolTemporaries places each alloc
// just before its first use and frees as early as they can go, so that
// what the steps hold in submission order (MemoryUse.SubmittedPeak) stays
// near the peak.
//
// The result, a Plan, is one global submission order of steps (run, record,
// wait) in which every record precedes its waits; each stream's steps, in
// that order, are its instruction list. A CostModel estimates each op's
// device time, and its Overheads what submitting ops, records and waits
// cost (DefaultOverheads are measured on an H100). Simulate runs a plan
// under a cost model for an eager run (the host submits every step one
// after another) or a graph replay; a plan's estimated makespan is that
// simulation of exactly that plan, for Options.Mode. All cost arithmetic
// saturates, so absurd costs cannot reorder a plan.
//
// A PerfModel is a CostModel of measurements: ops' durations by signature
// (Signature; copies of unmeasured sizes from a fitted bandwidth, a
// collective's per world size) and the device's overheads (the host's cost
// to submit each kind of op in an untraced run, records, waits, a run's
// fixed start, learned weighted toward short runs). It lives in a
// versioned file per device (LoadPerfModel, Save), which dagrun run
// --perf-model teaches.
//
// Verify checks a plan independently of how New made it; its failures are
// *VerifyError values with a VerifyKind and the ops involved.
package planner
