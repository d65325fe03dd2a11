package main

// What dagrun run reports: the report's types (the --json document) and
// its text.

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

// runReport is what dagrun run prints, as JSON with --format json.
type runReport struct {
	SchemaVersion int          `json:"schema_version"`
	Spec          string       `json:"spec"`
	Backend       string       `json:"backend"`
	Repeat        int          `json:"repeat"`
	Ops           int          `json:"ops"`
	Streams       int          `json:"streams"`
	CrossEdges    int          `json:"cross_edges"`
	Waits         int          `json:"waits"`
	WallNS        int64        `json:"wall_ns"` // the runs (the replays, with --graph), not the capture
	Graph         *graphReport `json:"graph,omitempty"`
	// Runs says which runs were eager and which replays of a graph
	// captured automatically (--graph auto), and CapturedAfter after how
	// many identical eager runs; absent when every run was of one kind.
	Runs          string                  `json:"runs,omitempty"`
	CapturedAfter int                     `json:"captured_after,omitempty"`
	TracedRuns    []int                   `json:"traced_runs,omitempty"`
	Outputs       []spec.OutputResult     `json:"outputs"`
	Saves         []spec.SavedFile        `json:"saves,omitempty"`  // by save host steps
	Memory        []executor.MemoryReport `json:"memory,omitempty"` // the temporaries, planned against measured
	MemoryBudget  *budgetReport           `json:"memory_budget,omitempty"`
	Warnings      []problem               `json:"warnings,omitempty"`

	Makespan  *profile.Makespan `json:"makespan,omitempty"`            // perfmodel.go
	PerfModel *profile.Update   `json:"perf_model,omitempty"`          // perfmodel.go
	Planned   *trace.Comparison `json:"planned_vs_achieved,omitempty"` // perfmodel.go
}

// graphReport is the figures of a run captured as a graph, in nanoseconds.
type graphReport struct {
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

// newRunReport is the figures of the runs rep reports of plan p.
func newRunReport(p *planner.Plan, rep *executor.Report) runReport {
	r := runReport{Repeat: rep.Repeat, Ops: p.Stats.Ops, Streams: p.Stats.Streams, CrossEdges: p.Stats.CrossEdges,
		Waits: p.Stats.Waits, WallNS: rep.Wall.Nanoseconds()}
	if g := rep.Replays; g != nil {
		r.Graph = &graphReport{CaptureNS: g.Capture.Nanoseconds(), InstantiateNS: g.Instantiate.Nanoseconds(),
			Replays: g.Replays, ReplayNS: g.Wall.Nanoseconds(), PerReplayNS: g.PerReplay.Nanoseconds(),
			FirstReplayNS: g.FirstReplay.Nanoseconds()}
		if r.Ops > 0 {
			r.Graph.PerOpNS = r.Graph.PerReplayNS / int64(r.Ops)
		}
	}
	return r
}

func (c *cli) printReport(w io.Writer, r runReport, repeat int) error {
	bw := bufio.NewWriter(w)
	for _, o := range r.Outputs {
		fmt.Fprintf(bw, "output %s: bytes=%d sum=%s fnv=%s\n", o.Buffer, o.Bytes,
			strconv.FormatFloat(float64(o.Sum), 'g', -1, 64), o.FNV)
		if o.Saved != "" {
			fmt.Fprintf(bw, "saved %s to %s\n", o.Buffer, human.Quote(o.Saved))
		}
	}
	for _, sv := range r.Saves {
		fmt.Fprintln(bw, sv)
	}
	runs := "1 run"
	if repeat > 1 {
		runs = fmt.Sprintf("%d runs (%s each)", repeat, short(r.WallNS/int64(repeat)))
	}
	fmt.Fprintf(bw, "ran %s on %s: %s, %s, %s, %s in %s\n",
		human.Quote(r.Spec), r.Backend, human.Count(r.Ops, "op", "ops"), human.Count(r.Streams, "stream", "streams"),
		human.Count(r.Waits, "wait", "waits"), runs, short(r.WallNS))
	for _, m := range r.Memory {
		fmt.Fprintln(bw, m)
	}
	writeBudgetReport(bw, r.MemoryBudget)
	if r.Runs != "" {
		fmt.Fprintf(bw, "graph: %s\n", r.Runs)
	}
	if g := r.Graph; g != nil {
		replays := fmt.Sprintf("%d replays", g.Replays)
		if g.Replays == 1 {
			replays = "1 replay"
		}
		each := fmt.Sprintf("%s each", short(g.PerReplayNS))
		if g.FirstReplayNS > 0 && g.Replays > 1 {
			each = fmt.Sprintf("%s each after the first, which took %s", short(g.PerReplayNS), short(g.FirstReplayNS))
		}
		fmt.Fprintf(bw, "graph: captured in %s, instantiated in %s; %s in %s (%s; %s per op)\n",
			short(g.CaptureNS), short(g.InstantiateNS), replays, short(g.ReplayNS), each, short(g.PerOpNS))
	}
	return bw.Flush()
}

// short is ns as dagrun writes durations everywhere.
func short(ns int64) string { return human.Duration(time.Duration(ns)) }
