package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

const runUsage = `usage: dagrun run spec.yaml [flags]

Run loads a spec, plans it onto streams and runs it, then prints a checksum
of each output (its bytes, the sum of its elements and an FNV-1a hash of its
bytes) and a summary: the backend, ops, streams, waits and wall time.
Outputs with a save path are written to files. A failing op is reported with
its place in the spec. On a terminal, long runs show a progress bar on
stderr.

Flags:
	--backend B    auto (default: cuda when a CUDA driver and device are
	               there, else cpu), cpu or cuda; overrides run.backend
	--streams N    compute streams per device and priority, 1 to 32;
	               overrides run.streams
	--repeat N     run N times; overrides run.repeat
	--graph        capture the run once as a graph (a CUDA graph on cuda)
	               and replay it N times, launched back to back; print the
	               capture, instantiation and replay times; overrides
	               run.graph (--graph=false runs eagerly)
	--trace FILE   time every op of an eager run and write a Chrome trace
	               (Perfetto, chrome://tracing) to FILE; print a timeline
	               summary; not with --graph
	--json         print the outputs and summary as JSON
	--save-dir DIR write the spec's relative save paths under DIR
`

// runReport is what dagrun run prints, as JSON with --json.
type runReport struct {
	Spec       string         `json:"spec"`
	Backend    string         `json:"backend"`
	Repeat     int            `json:"repeat"`
	Ops        int            `json:"ops"`
	Streams    int            `json:"streams"`
	CrossEdges int            `json:"cross_edges"`
	Waits      int            `json:"waits"`
	WallNS     int64          `json:"wall_ns"` // the runs (the replays, with --graph), not the capture
	Graph      *graphReport   `json:"graph,omitempty"`
	Outputs    []outputReport `json:"outputs"`
}

// graphReport is the figures of a run captured as a graph, in nanoseconds.
type graphReport struct {
	CaptureNS     int64 `json:"capture_ns"`
	InstantiateNS int64 `json:"instantiate_ns"`
	Replays       int   `json:"replays"`
	ReplayNS      int64 `json:"replay_ns"` // all replays, from the first launch to the last one's end
	PerReplayNS   int64 `json:"per_replay_ns"`
	PerOpNS       int64 `json:"per_op_ns"`
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

func (c *cli) run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	backend := &oneOf{choices: backendNames}
	fs.Var(backend, "backend", "")
	var streams streamsFlag
	fs.Var(&streams, "streams", "")
	repeat := fs.Int("repeat", 0, "")
	graph := fs.Bool("graph", false, "")
	traceFile := fs.String("trace", "", "")
	asJSON := fs.Bool("json", false, "")
	saveDir := fs.String("save-dir", "", "")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("give one spec file")
	}
	set := setFlags(fs)
	if set["repeat"] && *repeat < 1 {
		return usagef("--repeat %d: run at least once", *repeat)
	}
	// A replay runs as one launch, with no op timed on its own.
	if *graph && *traceFile != "" {
		return usagef("--trace times ops of eager runs; drop --graph to trace, or trace one eager run")
	}

	s, err := c.load(files[0])
	if err != nil {
		return err
	}
	if backend.value == "" {
		backend.value = s.Run.Backend
	}
	if *repeat == 0 {
		*repeat = s.Run.Repeat
	}
	if !set["graph"] {
		*graph = s.Run.Graph
		if *graph && *traceFile != "" {
			return usagef("--trace times ops of eager runs, and %s sets run.graph: true; add --graph=false to trace an eager run", s.File)
		}
	}
	p, err := makePlan(s, int(streams))
	if err != nil {
		return err
	}
	if *graph {
		// Before the backend is opened: a plan a graph cannot hold is
		// refused without touching a device.
		if err := executor.CheckCapture(p); err != nil {
			return c.captureFailure(s, err, set["graph"])
		}
	}
	b, used, err := openBackend(backend.value)
	if err != nil {
		return err
	}
	defer b.Close() // after the session's Close below; its errors are the session's

	// Host steps print to stdout, except where JSON goes there.
	s.Stdout, s.SaveDir = c.stdout, *saveDir
	info := c.stdout
	if *asJSON {
		s.Stdout, info = c.stderr, c.stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var opts []executor.Option
	if *traceFile != "" {
		opts = append(opts, executor.WithTiming())
	}
	sess, err := executor.Open(ctx, b, p, opts...)
	if err != nil {
		return c.opFailure(s, err)
	}
	bar := c.newProgress(*repeat, c.quietProgress(*asJSON, p))
	report, err := c.runSession(ctx, sess, s, p, *repeat, *graph, bar)
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return c.opFailure(s, err)
	}
	report.Spec, report.Backend = s.File, used

	if *traceFile != "" {
		if err := writeTrace(*traceFile, trace.FromRun(p, sess.Spans()), info); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	c.printReport(report, *repeat)
	return nil
}

// quietProgress reports whether a run must draw no progress bar: JSON is
// for programs, and lines that host steps print to the terminal the bar is
// on would be torn by it.
func (c *cli) quietProgress(asJSON bool, p *planner.Plan) bool {
	if asJSON {
		return true
	}
	hostSteps := slices.ContainsFunc(p.Graph.Ops, func(op *dag.Op) bool { return op.Kind == dag.Host })
	return hostSteps && c.isTerminal(c.stdout)
}

// runSession runs the plan repeat times, eagerly or as replays of a graph,
// and reads and saves the outputs.
func (c *cli) runSession(ctx context.Context, sess *executor.Session, s *spec.Spec, p *planner.Plan, repeat int, graph bool, bar *progress) (runReport, error) {
	r := runReport{
		Repeat:     repeat,
		Ops:        p.Stats.Ops,
		Streams:    p.Stats.Streams,
		CrossEdges: p.Stats.CrossEdges,
		Waits:      p.Stats.Waits,
	}
	defer bar.clear() // before anything else is printed, error or not
	if graph {
		g, err := replay(ctx, sess, repeat, r.Ops, bar)
		if err != nil {
			return r, err
		}
		r.Graph, r.WallNS = g, g.ReplayNS
	} else {
		start := time.Now()
		for i := range repeat {
			if err := sess.Run(ctx); err != nil {
				return r, err
			}
			bar.update(i + 1)
		}
		r.WallNS = time.Since(start).Nanoseconds()
	}
	bar.clear()
	for _, out := range s.Outputs {
		data, err := sess.Read(out.Buffer)
		if err != nil {
			return r, fmt.Errorf("%s: reading output %s: %w", out.Pos, out.Buffer.Name, err)
		}
		sum := spec.Checksum(data, out.Buffer.DType)
		o := outputReport{Buffer: out.Buffer.Name, DType: out.Buffer.DType.String(), Bytes: sum.Bytes,
			Sum: jsonFloat(sum.Sum), FNV: fmt.Sprintf("%016x", sum.FNV)}
		if out.Save != "" {
			o.Saved = s.SavePath(out.Save)
			if err := os.MkdirAll(filepath.Dir(o.Saved), 0o755); err != nil {
				return r, err
			}
			if err := os.WriteFile(o.Saved, data, 0o644); err != nil {
				return r, fmt.Errorf("%s: saving output %s: %w", out.Pos, out.Buffer.Name, err)
			}
		}
		r.Outputs = append(r.Outputs, o)
	}
	return r, nil
}

// Replays are launched in batches, then waited for: the replays of a
// batch run back to back, and between batches a failing op is reported
// and the progress bar moves. A batch is at most syncEvery replays and at
// most about syncWindow of work, judged by the replays so far, so that slow
// replays still report promptly and the work queued stays bounded.
const (
	syncEvery  = 64
	syncWindow = 100 * time.Millisecond
)

// replay captures the session's plan as a graph, instantiates it and
// replays it repeat times, then closes it.
func replay(ctx context.Context, sess *executor.Session, repeat, ops int, bar *progress) (r *graphReport, err error) {
	g, err := sess.Capture(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := g.Close(); err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	batch := 1 // until a replay has been timed
	for done := 0; done < repeat; {
		n := min(batch, repeat-done)
		for range n {
			if err := g.Launch(ctx); err != nil {
				return nil, err
			}
		}
		if err := g.Sync(ctx); err != nil {
			return nil, err
		}
		done += n
		bar.update(done)
		batch = syncEvery
		if each := time.Since(start) / time.Duration(done); each > 0 {
			batch = int(min(max(syncWindow/each, 1), syncEvery))
		}
	}
	wall := time.Since(start)
	st := g.Stats()
	r = &graphReport{
		CaptureNS:     st.Capture.Nanoseconds(),
		InstantiateNS: st.Instantiate.Nanoseconds(),
		Replays:       st.Launches,
		ReplayNS:      wall.Nanoseconds(),
		PerReplayNS:   wall.Nanoseconds() / int64(repeat),
	}
	if ops > 0 {
		r.PerOpNS = r.PerReplayNS / int64(ops)
	}
	return r, nil
}

func (c *cli) printReport(r runReport, repeat int) {
	for _, o := range r.Outputs {
		fmt.Fprintf(c.stdout, "output %s: bytes=%d sum=%s fnv=%s\n", o.Buffer, o.Bytes,
			strconv.FormatFloat(float64(o.Sum), 'g', -1, 64), o.FNV)
		if o.Saved != "" {
			fmt.Fprintf(c.stdout, "saved %s to %s\n", o.Buffer, o.Saved)
		}
	}
	wall := time.Duration(r.WallNS)
	runs := "1 run"
	if repeat > 1 {
		runs = fmt.Sprintf("%d runs (%s each)", repeat, wall/time.Duration(repeat))
	}
	fmt.Fprintf(c.stdout, "ran %s on %s: %d ops, %d streams, %d waits, %s in %s\n",
		r.Spec, r.Backend, r.Ops, r.Streams, r.Waits, runs, wall)
	if g := r.Graph; g != nil {
		replays := fmt.Sprintf("%d replays", g.Replays)
		if g.Replays == 1 {
			replays = "1 replay"
		}
		fmt.Fprintf(c.stdout, "graph: captured in %s, instantiated in %s; %s in %s (%s each, %s per op)\n",
			short(g.CaptureNS), short(g.InstantiateNS), replays, short(g.ReplayNS), short(g.PerReplayNS), short(g.PerOpNS))
	}
}

// short is ns as a duration rounded to three significant digits, which is
// as far as timings of one run are repeatable.
func short(ns int64) time.Duration {
	d := time.Duration(ns)
	for unit := time.Duration(1); unit < time.Second; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Second)
}

func writeTrace(path string, t *trace.Trace, summary io.Writer) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.WriteChrome(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := t.WriteSummary(summary); err != nil {
		return err
	}
	_, err = fmt.Fprintf(summary, "trace written to %s\n", path)
	return err
}
