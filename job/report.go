package job

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// Report is what Run reports of one program's runs: as JSON, the document
// dagrun run --format json writes; as text (WriteText), its summary.
type Report struct {
	SchemaVersion int          `json:"schema_version"`
	Spec          string       `json:"spec"`
	Backend       string       `json:"backend"`
	Repeat        int          `json:"repeat"`
	Ops           int          `json:"ops"`
	Streams       int          `json:"streams"`
	CrossEdges    int          `json:"cross_edges"`
	Waits         int          `json:"waits"`
	WallNS        int64        `json:"wall_ns"` // the runs (the replays, under GraphAlways), not the capture
	Graph         *GraphReport `json:"graph,omitempty"`
	// Runs says which runs were eager and which replays of a graph
	// captured automatically (GraphAuto), and CapturedAfter after how many
	// identical eager runs; absent when every run was of one kind.
	Runs          string                  `json:"runs,omitempty"`
	CapturedAfter int                     `json:"captured_after,omitempty"`
	TracedRuns    []int                   `json:"traced_runs,omitempty"`
	Outputs       []spec.OutputResult     `json:"outputs"`
	Saves         []spec.SavedFile        `json:"saves,omitempty"`  // by save host steps
	Memory        []executor.MemoryReport `json:"memory,omitempty"` // the temporaries, planned against measured
	MemoryBudget  *BudgetReport           `json:"memory_budget,omitempty"`
	Warnings      []spec.Problem          `json:"warnings,omitempty"` // the spec's, for a reader of the JSON alone

	Makespan  *profile.Makespan `json:"makespan,omitempty"` // with a perf model: its estimate against the runs
	PerfModel *profile.Update   `json:"perf_model,omitempty"`
	// Planned is the plan against the last traced run, where the plan's
	// costs fit the backend.
	Planned *trace.Comparison `json:"planned_vs_achieved,omitempty"`

	// Exec is the Runner's report: the runs that completed, their traced
	// spans and log, after an error too.
	Exec *executor.Report `json:"-"`
	// Timing is how the session timed ops.
	Timing Timing `json:"-"`
	// Unfused says which fused ops (a gemm with an epilogue) the backend
	// ran as the product followed by the builtin kernels, and why
	// (executor.Session.Unfused), a line each.
	Unfused []string `json:"-"`

	plan          *planner.Plan
	wait          func() // waits for the outputs' checksums
	gpuModelOnCPU bool   // Config.gpuModelOnCPU
}

// GraphReport is the figures of runs replayed from a graph, in
// nanoseconds.
type GraphReport struct {
	CaptureNS     int64 `json:"capture_ns"`
	InstantiateNS int64 `json:"instantiate_ns"`
	Replays       int   `json:"replays"`
	ReplayNS      int64 `json:"replay_ns"` // all replays, from the first launch to the last one's end
	// PerReplayNS is the time of a replay launched back to back with
	// others, after the warm-up (executor.ReplayReport); FirstReplayNS is
	// the first's, launched and synchronised alone.
	PerReplayNS   int64 `json:"per_replay_ns"`
	FirstReplayNS int64 `json:"first_replay_ns,omitempty"`
	PerOpNS       int64 `json:"per_op_ns"`
}

// figures fills in the figures of plan p's runs that rep reports.
func (r *Report) figures(p *planner.Plan, rep *executor.Report) {
	r.Repeat, r.Ops, r.Streams, r.CrossEdges = rep.Repeat, p.Stats.Ops, p.Stats.Streams, p.Stats.CrossEdges
	r.Waits, r.WallNS = p.Stats.Waits, rep.Wall.Nanoseconds()
	r.Graph = graphReport(rep.Replays, r.Ops)
}

// graphReport is the figures of g, the replays of a plan of ops ops; nil
// when there were none.
func graphReport(g *executor.ReplayReport, ops int) *GraphReport {
	if g == nil {
		return nil
	}
	r := &GraphReport{CaptureNS: g.Capture.Nanoseconds(), InstantiateNS: g.Instantiate.Nanoseconds(),
		Replays: g.Replays, ReplayNS: g.Wall.Nanoseconds(), PerReplayNS: g.PerReplay.Nanoseconds(),
		FirstReplayNS: g.FirstReplay.Nanoseconds()}
	if ops > 0 {
		r.PerOpNS = r.PerReplayNS / int64(ops)
	}
	return r
}

// writeLine writes the graph's line of dagrun run's report: its capture,
// and its replays and what each took.
func (g *GraphReport) writeLine(w io.Writer) {
	replays := fmt.Sprintf("%d replays", g.Replays)
	if g.Replays == 1 {
		replays = "1 replay"
	}
	each := fmt.Sprintf("%s each", short(g.PerReplayNS))
	if g.FirstReplayNS > 0 && g.Replays > 1 {
		each = fmt.Sprintf("%s each after the first, which took %s", short(g.PerReplayNS), short(g.FirstReplayNS))
	}
	fmt.Fprintf(w, "graph: captured in %s, instantiated in %s; %s in %s (%s; %s per op)\n",
		short(g.CaptureNS), short(g.InstantiateNS), replays, short(g.ReplayNS), each, short(g.PerOpNS))
}

// Wait waits for the outputs' checksums, computed on goroutines while the
// caller closes its backend (spec.Spec.ReadOutputs).
func (r *Report) Wait() {
	if r.wait != nil {
		r.wait()
	}
}

// BudgetReport is what meeting the memory budget cost the plan
// (plan.Budget).
type BudgetReport struct {
	Orderings       int   `json:"orderings"`    // pairs of temporaries ordered
	Dependencies    int   `json:"dependencies"` // dependencies added between their uses
	EstMakespanNS   int64 `json:"est_makespan_ns"`
	UnconstrainedNS int64 `json:"unconstrained_est_makespan_ns"` // the plan's estimate without the budget
}

func budgetReport(p *planner.Plan) *BudgetReport {
	b := p.Budget
	if b == nil {
		return nil
	}
	return &BudgetReport{Orderings: b.Orderings, Dependencies: b.Dependencies,
		EstMakespanNS: int64(p.Stats.Makespan), UnconstrainedNS: int64(b.Unconstrained)}
}

// String says what the budget cost in a line.
func (b *BudgetReport) String() string {
	ratio := "no estimate"
	if b.UnconstrainedNS > 0 {
		ratio = fmt.Sprintf("%.2fx", float64(b.EstMakespanNS)/float64(b.UnconstrainedNS))
	}
	return fmt.Sprintf("memory budget: %s of temporaries ordered; estimated makespan %s against %s without it (%s)",
		human.Count(b.Orderings, "pair", "pairs"), short(b.EstMakespanNS), short(b.UnconstrainedNS), ratio)
}

// WriteText writes the report as dagrun run prints it: the outputs, the
// runs' figures, the memory, the graph's and, with a perf model, its
// lines (model's coverage, WriteModel).
func (r *Report) WriteText(w io.Writer, model *profile.Learner) error {
	bw := bufio.NewWriter(w)
	writeOutputs(bw, "", r.Outputs, r.Saves)
	runs := "1 run"
	if r.Repeat > 1 {
		runs = fmt.Sprintf("%d runs (%s each)", r.Repeat, short(r.WallNS/int64(r.Repeat)))
	}
	fmt.Fprintf(bw, "ran %s on %s: %s, %s, %s, %s in %s\n",
		human.Quote(r.Spec), r.Backend, human.Count(r.Ops, "op", "ops"), human.Count(r.Streams, "stream", "streams"),
		human.Count(r.Waits, "wait", "waits"), runs, short(r.WallNS))
	for _, m := range r.Memory {
		fmt.Fprintln(bw, m)
	}
	if r.MemoryBudget != nil {
		fmt.Fprintln(bw, r.MemoryBudget)
	}
	if r.Runs != "" {
		fmt.Fprintf(bw, "graph: %s\n", r.Runs)
	}
	if g := r.Graph; g != nil {
		g.writeLine(bw)
	}
	if model != nil {
		WriteModel(bw, "", model, r.Makespan, r.PerfModel)
	}
	return bw.Flush()
}

// writeOutputs writes a line for each output and each file saved, each
// after prefix ("rank N " for a rank's).
func writeOutputs(w io.Writer, prefix string, outs []spec.OutputResult, saves []spec.SavedFile) {
	for _, o := range outs {
		fmt.Fprintf(w, "%soutput %s: bytes=%d sum=%s fnv=%s\n", prefix, o.Buffer, o.Bytes,
			strconv.FormatFloat(float64(o.Sum), 'g', -1, 64), o.FNV)
		if o.Saved != "" {
			saved := human.Quote(o.Saved)
			if prefix != "" {
				saved = o.Saved // as ranks always wrote it
			}
			fmt.Fprintf(w, "%ssaved %s to %s\n", prefix, o.Buffer, saved)
		}
	}
	for _, sv := range saves {
		fmt.Fprintf(w, "%s%s\n", prefix, sv)
	}
}

// WriteModel writes the perf-model lines of a run (of one rank, with
// prefix "rank N "): the model's use, the makespan compared, the update.
func WriteModel(w io.Writer, prefix string, l *profile.Learner, m *profile.Makespan, u *profile.Update) {
	fmt.Fprintln(w, prefix+l.Coverage())
	if m != nil {
		fmt.Fprintln(w, prefix+m.String())
	}
	if u != nil {
		fmt.Fprintln(w, prefix+u.String())
	}
}

// short is ns as dagrun writes durations everywhere.
func short(ns int64) string { return human.Duration(time.Duration(ns)) }
