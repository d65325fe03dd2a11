// Package planner schedules a dag.Graph onto streams.
//
// New takes functional options: planner.New(g, planner.Streams(2),
// planner.Optimize(planner.LeastMemory)). It runs a pipeline of named
// passes (Pass), each stating what it may change (Scope): fuse (unless
// Fuse(FuseNone) says otherwise), which makes a gemm and the bias_add,
// gelu and relu launches that only finish its output one gemm with an
// epilogue, and the rewrites that Rewrite adds, which change the graph
// too (a plan of a changed graph keeps the declared one and each op's
// parts: Plan.Declared, Plan.Parts); bodies, which plans the bodies of
// loops and branches as plans of their own; order, place and events,
// once per candidate plan; gather, which moves a wait up its stream to
// join an earlier one where its event is reached by then in the cost
// model's schedule, so that the op it stood before follows its
// predecessor directly (unless Gather(GatherNone)); memory, which packs
// temporaries into arenas
// and meets each MemoryBudget; and verify, when Verify asks. The
// Objective (Optimize: the shortest makespan by default, the least
// memory, or the fewest streams) chooses among the candidates, for a plan and its bodies alike,
// and Plan.Passes says what each pass did and cost.
//
// Placement puts every op on an in-order stream of its device, priority
// and kind (compute, a copy stream per direction, collectives), in the
// order the Strategy gives (list scheduling by default), each where it can
// start earliest counting what its waits cost. Dependencies across
// streams become an event record and a wait, left out where earlier waits
// already imply it (vector clocks over streams).
//
// The plan's types are package plan's, named here too; package perf
// prices ops and simulates plans, package memory lays out temporaries,
// and package verify checks a plan independently of how it was made.
package planner
