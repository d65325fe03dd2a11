package job

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/spec"
)

// Shapes: one spec at several values of its parameters, each run in turn
// from one executor.Shapes (dagrun run --set T=512,1024,2048): the shapes
// are planned, opened and captured when it opens, share one copy of the
// memory, and each runs Repeat times.

// ShapeValues is every combination of the values lists gives to names
// (lists[i] to names[i]), the first name's varying slowest, each in the
// order given.
func ShapeValues(names []string, lists [][]int64) []map[string]int64 {
	out := []map[string]int64{{}}
	for i, name := range names {
		var next []map[string]int64
		for _, v := range out {
			for _, x := range lists[i] {
				c := maps.Clone(v)
				c[name] = x
				next = append(next, c)
			}
		}
		out = next
	}
	return out
}

// ShapesReport is what RunShapes reports: as JSON, the document dagrun run
// --format json writes for several values.
type ShapesReport struct {
	SchemaVersion int           `json:"schema_version"`
	Spec          string        `json:"spec"`
	Backend       string        `json:"backend"`
	Repeat        int           `json:"repeat"` // the runs of each shape
	Shapes        []ShapeReport `json:"shapes"`
	// Shared says the shapes share one copy of the memory, Memory what
	// it holds; NotShared says why they do not.
	Shared    bool           `json:"shared"`
	NotShared string         `json:"not_shared,omitempty"`
	Memory    []HeldReport   `json:"memory,omitempty"`
	Warnings  []spec.Problem `json:"warnings,omitempty"`

	wait []func()
}

// ShapeReport is one shape's runs.
type ShapeReport struct {
	Values     map[string]int64    `json:"values"`
	Eager      string              `json:"eager,omitempty"` // why its runs were eager, not replays
	Ops        int                 `json:"ops"`
	Streams    int                 `json:"streams"`
	CrossEdges int                 `json:"cross_edges"`
	Waits      int                 `json:"waits"`
	WallNS     int64               `json:"wall_ns"` // the runs, not the capture
	Graph      *GraphReport        `json:"graph,omitempty"`
	Outputs    []spec.OutputResult `json:"outputs"`
	// Memory is what the shape's plan needs, memory by memory: what a
	// session of this shape alone would hold.
	Memory []ShapeMemory `json:"memory"`
}

// ShapeMemory is what a shape needs of one memory.
type ShapeMemory struct {
	Memory     string `json:"memory"`
	Persistent int64  `json:"persistent_bytes"`
	Arena      int64  `json:"arena_bytes"`
}

// HeldReport is what the shapes' one session holds of a memory, against
// the largest shape alone and the shapes in sessions of their own.
type HeldReport struct {
	Memory     string `json:"memory"`
	Persistent int64  `json:"persistent_bytes"`
	Arena      int64  `json:"arena_bytes"`
	Largest    int64  `json:"largest_shape_bytes"`     // the shape that needs the most there, alone
	Apart      int64  `json:"separate_sessions_bytes"` // every shape's need, added
}

// Bytes is what the session holds there.
func (h HeldReport) Bytes() int64 { return dag.AddSat(h.Persistent, h.Arena) }

// Wait waits for the outputs' checksums.
func (r *ShapesReport) Wait() {
	for _, w := range r.wait {
		w()
	}
}

// shapeSpecs loads s at each of values (spec.Spec.At): every mistake of
// every shape comes back before anything runs, each saying at which
// values.
func shapeSpecs(s *spec.Spec, values []map[string]int64) (map[string]*spec.Spec, error) {
	specs := map[string]*spec.Spec{}
	var errs spec.ErrorList
	for _, v := range values {
		at, err := s.At(v)
		if err == nil {
			specs[spec.FormatValues(v)] = at
			continue
		}
		list := spec.Errors(err)
		if len(list) == 0 {
			return nil, fmt.Errorf("the spec at %s: %w", spec.FormatValues(v), err)
		}
		for _, e := range list {
			c := *e
			if !strings.Contains(c.Msg, "--set") {
				c.Msg += " (at " + spec.FormatValues(v) + ")"
			}
			errs = append(errs, &c)
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return specs, nil
}

// RunShapes runs spec s at each of values in turn, cfg.Repeat times each,
// from one executor.Shapes on b: every shape planned (for cfg's layout and
// what b knows of the machine), opened and, unless cfg.Graph is
// GraphNever, captured when the Shapes opens, over one copy of the
// memory. Each shape starts from its own initial contents
// (executor.WithInitialContents), so that its outputs, read after its
// runs, are those of a run of that shape alone. An error of the
// spec at some values is a spec.ErrorList, before anything runs; the
// others are *RunError, with the report of the shapes that ran.
func RunShapes(ctx context.Context, b device.Backend, s *spec.Spec, values []map[string]int64, cfg Config) (*ShapesReport, error) {
	r := &ShapesReport{SchemaVersion: SchemaVersion, Spec: s.File, Backend: cfg.Backend, Repeat: cfg.Repeat}
	specs, err := shapeSpecs(s, values)
	if err != nil {
		return r, err
	}
	var mu sync.Mutex // the Shapes calls its functions from one goroutine; the map is read here too
	byGraph := map[*dag.Graph]*spec.Spec{}
	for _, sp := range specs {
		byGraph[sp.Graph] = sp
	}
	build := func(ctx context.Context, v map[string]int64) (*dag.Graph, error) {
		mu.Lock()
		defer mu.Unlock()
		if sp := specs[spec.FormatValues(v)]; sp != nil {
			return sp.Graph, nil
		}
		return s.Shape(ctx, v)
	}
	mode := Mode(cfg.Graph != executor.GraphNever)
	planOf := func(_ context.Context, g *dag.Graph) (*planner.Plan, error) {
		mu.Lock()
		sp := byGraph[g]
		mu.Unlock()
		if sp == nil {
			return nil, errors.New("job: a shape's graph is not one of the spec's")
		}
		m, err := executor.MachineOf(b, g)
		if err != nil {
			return nil, err
		}
		return PlanWithModel(sp, cfg.Layout.PlanOptions(sp), nil, mode, m, nil)
	}
	opts := append(slices.Clone(cfg.Options), executor.WithTemporaries(cfg.Temporaries), executor.WithPlanner(planOf),
		executor.WithBuckets(values...), executor.WithKeep(len(values)), executor.WithPaddable(s.Paddable()...),
		executor.WithInitialContents())
	if cfg.Graph == executor.GraphNever {
		opts = append(opts, executor.WithGraph(executor.GraphNever))
	}
	shapes, err := executor.OpenShapes(ctx, b, build, opts...)
	if err != nil {
		return r, &RunError{Err: err}
	}
	for _, v := range values {
		sr, err := runShape(ctx, shapes, specs[spec.FormatValues(v)], v, cfg.Repeat, r)
		if err != nil {
			return r, &RunError{Err: errors.Join(err, shapes.Close()), Done: sr, Repeat: cfg.Repeat}
		}
	}
	held, shared, why := shapes.Memory()
	r.Shared, r.NotShared = shared, why
	r.Memory = heldReports(held, r.Shapes)
	if err := shapes.Close(); err != nil {
		return r, &RunError{Err: err, Done: cfg.Repeat, Repeat: cfg.Repeat}
	}
	return r, nil
}

// runShape runs values repeat times and adds the shape's report to r; it
// returns the runs done.
func runShape(ctx context.Context, shapes *executor.Shapes, sp *spec.Spec, values map[string]int64, repeat int, r *ShapesReport) (int, error) {
	rep, err := shapes.Repeat(ctx, values, repeat)
	if err != nil {
		done := 0
		if rep != nil && rep.Report != nil {
			done = rep.Runs
		}
		return done, err
	}
	p := rep.Plan
	sh := ShapeReport{Values: maps.Clone(values), Eager: rep.Eager, Ops: p.Stats.Ops, Streams: p.Stats.Streams,
		CrossEdges: p.Stats.CrossEdges, Waits: p.Stats.Waits, WallNS: rep.Wall.Nanoseconds()}
	var one Report
	one.figures(p, rep.Report)
	sh.Graph = one.Graph
	outs, wait, err := sp.ReadOutputs(func(b *dag.Buffer) ([]byte, error) { return shapes.Read(b.Name) })
	if err != nil {
		return rep.Runs, err
	}
	sh.Outputs = outs
	r.wait = append(r.wait, wait)
	var uses []plan.MemoryUse
	if p.Memory != nil {
		uses = p.Memory.Memories
	}
	for _, u := range uses {
		sh.Memory = append(sh.Memory, ShapeMemory{Memory: plan.MemoryName(u.Device), Persistent: u.Persistent, Arena: u.ArenaBytes})
	}
	r.Shapes = append(r.Shapes, sh)
	return rep.Runs, nil
}

// heldReports are what the Shapes holds (held), against the shapes' own
// needs.
func heldReports(held []executor.HeldMemory, shapes []ShapeReport) []HeldReport {
	var out []HeldReport
	for _, h := range held {
		hr := HeldReport{Memory: plan.MemoryName(h.Memory), Persistent: h.Persistent, Arena: h.Arena}
		for _, sh := range shapes {
			for _, m := range sh.Memory {
				if m.Memory == hr.Memory {
					need := dag.AddSat(m.Persistent, m.Arena)
					hr.Largest = max(hr.Largest, need)
					hr.Apart = dag.AddSat(hr.Apart, need)
				}
			}
		}
		out = append(out, hr)
	}
	return out
}

// WriteText writes the report as dagrun run prints it: each shape's
// outputs and runs, prefixed with its values, then what the one session
// held against the largest shape alone and sessions of their own.
func (r *ShapesReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, sh := range r.Shapes {
		prefix := "shape " + spec.FormatValues(sh.Values) + ": "
		writeOutputs(bw, prefix, sh.Outputs, nil)
		runs := "1 run"
		if r.Repeat > 1 {
			runs = fmt.Sprintf("%d runs (%s each)", r.Repeat, short(sh.WallNS/int64(r.Repeat)))
		}
		how := "replayed"
		if g := sh.Graph; g != nil && g.Replays > 0 {
			how = fmt.Sprintf("replays of a graph captured in %s, %s each", short(g.CaptureNS), short(g.PerReplayNS))
		} else if sh.Eager != "" {
			how = "eager: " + sh.Eager
		}
		fmt.Fprintf(bw, "%s%s, %s, %s: %s in %s; %s\n", prefix, human.Count(sh.Ops, "op", "ops"),
			human.Count(sh.Streams, "stream", "streams"), human.Count(sh.Waits, "wait", "waits"), runs, short(sh.WallNS), how)
		for _, m := range sh.Memory {
			fmt.Fprintf(bw, "%s%s: %s (persistent %s, arena %s)\n", prefix, m.Memory, dag.FormatBytes(dag.AddSat(m.Persistent, m.Arena)),
				dag.FormatBytes(m.Persistent), dag.FormatBytes(m.Arena))
		}
	}
	names := make([]string, len(r.Shapes))
	for i, sh := range r.Shapes {
		names[i] = spec.FormatValues(sh.Values)
	}
	fmt.Fprintf(bw, "ran %s on %s: %s in turn from one session (%s)\n", human.Quote(r.Spec), r.Backend,
		human.Count(len(r.Shapes), "shape", "shapes"), strings.Join(names, "; "))
	if !r.Shared {
		fmt.Fprintf(bw, "memory: not shared: %s\n", r.NotShared)
	}
	for _, h := range r.Memory {
		fmt.Fprintf(bw, "memory %s: %s held for every shape (persistent %s, arena %s); the largest shape alone needs %s, sessions of their own %s\n",
			h.Memory, dag.FormatBytes(h.Bytes()), dag.FormatBytes(h.Persistent), dag.FormatBytes(h.Arena), dag.FormatBytes(h.Largest), dag.FormatBytes(h.Apart))
	}
	return bw.Flush()
}
