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
	"strconv"
	"time"

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
its place in the spec.

Flags:
	--backend B    auto (default: cuda when a CUDA driver and device are
	               there, else cpu), cpu or cuda; overrides run.backend
	--streams N    compute streams per device and priority, 1 to 32;
	               overrides run.streams
	--repeat N     run the graph N times; overrides run.repeat
	--trace FILE   time every op and write a Chrome trace (Perfetto,
	               chrome://tracing) to FILE; print a timeline summary
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
	WallNS     int64          `json:"wall_ns"`
	Outputs    []outputReport `json:"outputs"`
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
	if setFlags(fs)["repeat"] && *repeat < 1 {
		return usagef("--repeat %d: run at least once", *repeat)
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
	if s.Run.Graph {
		fmt.Fprintf(c.stderr, "%s: note: graph capture is not available in this build; running eagerly\n", s.File)
	}
	p, err := makePlan(s, int(streams))
	if err != nil {
		return err
	}
	b, used, err := openBackend(backend.value)
	if err != nil {
		return err
	}

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
	report, err := c.runSession(ctx, sess, s, p, *repeat)
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

// runSession runs the plan repeat times and reads and saves the outputs.
func (c *cli) runSession(ctx context.Context, sess *executor.Session, s *spec.Spec, p *planner.Plan, repeat int) (runReport, error) {
	r := runReport{
		Repeat:     repeat,
		Ops:        p.Stats.Ops,
		Streams:    p.Stats.Streams,
		CrossEdges: p.Stats.CrossEdges,
		Waits:      p.Stats.Waits,
	}
	start := time.Now()
	for range repeat {
		if err := sess.Run(ctx); err != nil {
			return r, err
		}
	}
	r.WallNS = time.Since(start).Nanoseconds()
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
