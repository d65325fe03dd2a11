package main

// What dagrun run reports: the report's types (the --json document) and
// its text.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/profile"
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
	Runs          string         `json:"runs,omitempty"`
	CapturedAfter int            `json:"captured_after,omitempty"`
	TracedRuns    []int          `json:"traced_runs,omitempty"`
	Outputs       []outputReport `json:"outputs"`
	Saves         []saveReport   `json:"saves,omitempty"`  // by save host steps
	Memory        []memoryReport `json:"memory,omitempty"` // the temporaries, planned against measured (memoryrun.go)
	MemoryBudget  *budgetReport  `json:"memory_budget,omitempty"`
	Warnings      []problem      `json:"warnings,omitempty"`

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
	// others, after the first (see replayClock); FirstReplayNS is the
	// first's, launched and synchronised alone.
	PerReplayNS   int64 `json:"per_replay_ns"`
	FirstReplayNS int64 `json:"first_replay_ns,omitempty"`
	PerOpNS       int64 `json:"per_op_ns"`
}

// replayClock times replays launched in batches. The first batch (one
// replay: the graph's upload, and the warm-up of what it touches) is kept
// apart, and the batches that start in the first half of the replays
// warm up (as eager runs do: warmups); the others count from each batch's
// first launch to its Sync's return, so that what the host does between
// batches (reading traced replays' spans, the progress bar) is not
// charged to the replays.
type replayClock struct {
	warm            int // replays that warm up
	first, steady   time.Duration
	firstN, steadyN int
	// all and allN are every batch after the first, for too few replays
	// to leave any after the warm-up.
	all  time.Duration
	allN int
}

func newReplayClock(repeat int) *replayClock { return &replayClock{warm: profile.Warmups(repeat)} }

// add counts a batch of n replays, the first after done others, that
// took d.
func (c *replayClock) add(d time.Duration, n, done int) {
	switch {
	case c.firstN == 0:
		c.first, c.firstN = d, n
		return
	case done >= c.warm:
		c.steady += d
		c.steadyN += n
	}
	c.all += d
	c.allN += n
}

// perReplay is the time of a replay after the warm-up, or, with too few
// replays for that, after the first batch, or of the first; 0 when none
// was timed.
func (c *replayClock) perReplay() time.Duration {
	switch {
	case c.steadyN > 0:
		return c.steady / time.Duration(c.steadyN)
	case c.allN > 0:
		return c.all / time.Duration(c.allN)
	case c.firstN > 0:
		return c.first / time.Duration(c.firstN)
	}
	return 0
}

// newGraphReport is the figures of repeat replays of a graph of ops ops
// that took wall from the first launch to the last one's end, timed batch
// by batch by clock (nil: each replay is wall / repeat).
func newGraphReport(st executor.GraphStats, wall time.Duration, repeat, ops int, clock *replayClock) *graphReport {
	r := &graphReport{
		CaptureNS:     st.Capture.Nanoseconds(),
		InstantiateNS: st.Instantiate.Nanoseconds(),
		Replays:       st.Launches,
		ReplayNS:      wall.Nanoseconds(),
		PerReplayNS:   wall.Nanoseconds() / int64(max(repeat, 1)),
	}
	if clock != nil && clock.perReplay() > 0 {
		r.PerReplayNS, r.FirstReplayNS = clock.perReplay().Nanoseconds(), clock.first.Nanoseconds()
	}
	if ops > 0 {
		r.PerOpNS = r.PerReplayNS / int64(ops)
	}
	return r
}

type outputReport struct {
	Buffer string    `json:"buffer"`
	DType  string    `json:"dtype"`
	Bytes  int       `json:"bytes"`
	Sum    jsonFloat `json:"sum"`
	FNV    string    `json:"fnv"`
	Saved  string    `json:"saved,omitempty"`
}

// jsonFloat is a float64 that JSON can hold even when it is not finite.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return json.Marshal(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return json.Marshal(v)
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
	writeSaves(bw, "", r.Saves)
	runs := "1 run"
	if repeat > 1 {
		runs = fmt.Sprintf("%d runs (%s each)", repeat, short(r.WallNS/int64(repeat)))
	}
	fmt.Fprintf(bw, "ran %s on %s: %s, %s, %s, %s in %s\n",
		human.Quote(r.Spec), r.Backend, human.Count(r.Ops, "op", "ops"), human.Count(r.Streams, "stream", "streams"),
		human.Count(r.Waits, "wait", "waits"), runs, short(r.WallNS))
	writeMemoryReports(bw, r.Memory) // memoryrun.go
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
