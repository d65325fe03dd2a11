// Package trace shows what a plan did, or would do, as data and pictures.
//
// A Trace is a timeline: a lane per stream of the plan (grouped by device,
// named with the stream's name and priority), a slice per op with its start
// and duration, a flow per event record and wait (from the end of the op the
// event is recorded after to the start of the op after the wait), and the
// plan's figures. FromRun builds it from the op times of a run, FromRuns
// from those of several runs (each slice then carries its run's number);
// FromPlan from the planner's cost model, without running anything.
//
// A Trace is written as Chrome Trace Event JSON (WriteChrome; Perfetto and
// chrome://tracing open it, and ReadChrome reads it back), as a text summary
// (WriteSummary: per-stream busy time, copy/compute and collective/compute
// overlap, makespan against the critical path, the longest waits), and as a self-contained
// SVG or HTML timeline (WriteSVG, WriteHTML). A plan alone is drawn by
// PlanDOT (Graphviz), PlanSVG and PlanHTML. Pictures load nothing from the
// network, use generic font families and escape every name. How each op
// kind is shown (its legend label, colours, and what it counts as in the
// overlaps) is one table keyed by dag.OpKind, which a test
// holds to dag.OpKinds(). Trace files carry SchemaVersion in their
// otherData as schema_version, and for measured traces how the ops were
// timed (Figures.Timing: "cupti", "cupti-graph", "events" or "timers", with
// the reason and the records dropped) and whether replays were traced
// whole (Figures.Replays: each traced replay's start and duration, for
// dagrun run --graph --trace-detail replays or where a backend cannot time
// a replay's ops one by one).
//
// ComparePlan sets a run's spans against the plan's own simulation of it
// (perf.Simulate under the cost model it was planned with): the pairs
// of ops the plan meant to overlap and whether they did, and the ops that
// started late beyond what their dependencies handed down, with what held
// them (a wait for an op on another stream, their own stream, or the
// host). PerfSamples turns spans into the samples a perf.PerfModel
// learns from.
//
// How the dagrun command uses it:
//
//	// dagrun run spec.yaml --trace run.json [--repeat N --trace-runs K]
//	sess, err := executor.Open(ctx, backend, plan, executor.WithTiming())
//	// for each run i: start := time.Since(first); sess.Run(ctx), then
//	runs = append(runs, trace.RunSpans{Run: i, Start: start, Spans: sess.Spans()})
//	t := trace.FromRuns(plan, runs) // trace.FromRun(plan, sess.Spans()) for one
//	err = t.WriteChrome(file)  // run.json
//	err = t.WriteSummary(os.Stdout)
//
//	// dagrun viz spec.yaml -o plan.svg|plan.html|plan.dot: the plan, not run
//	switch filepath.Ext(out) {
//	case ".svg":
//		err = trace.PlanSVG(file, plan)
//	case ".html":
//		err = trace.PlanHTML(file, plan)
//	case ".dot":
//		err = trace.PlanDOT(file, plan)
//	}
//
//	// dagrun viz run.json -o timeline.svg|timeline.html: the measured run
//	t, err := trace.ReadChrome(jsonFile)
//	// then t.WriteSVG(file) or t.WriteHTML(file) by extension;
//	// t.WriteSummary(os.Stdout) prints the figures again.
//
// A trace file tells run.json from a spec by content: ReadChrome fails with a
// *ReadError on anything that is not Chrome Trace Event JSON.
package trace
