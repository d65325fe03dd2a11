package main

// Ranks: dagrun run of a spec as a world of N ranks, all in this process
// (run.world or --world N) or one rank per process (--rank R --world W, or
// the variables of torchrun, Slurm or Open MPI).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/progress"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// rankFlags are dagrun run's flags for ranks.
type rankFlags struct {
	world, rank int
	timeout     time.Duration
}

func (r *rankFlags) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&r.world, "world", 0, "")
	fs.IntVar(&r.rank, "rank", 0, "")
	fs.DurationVar(&r.timeout, "rank-timeout", 0, "")
}

// rankMode is how a run spans ranks: every rank of a world in this
// process (place nil), or one rank of a world of processes.
type rankMode struct {
	world int
	place *executor.Place
}

// ranks decides the rank mode of a run of s from the flags and the
// environment; nil means an ordinary run of one rank.
func (f *runFlags) rankMode(s *spec.Spec, getenv func(string) string) (*rankMode, error) {
	set := f.set
	if set["rank-timeout"] && f.ranking.timeout <= 0 {
		return nil, usagef("--rank-timeout %s: give a positive duration", f.ranking.timeout)
	}
	if set["world"] && (f.ranking.world < 1 || f.ranking.world > maxWorld) {
		return nil, usagef("--world %d: a world has 1 to %d ranks", f.ranking.world, maxWorld)
	}
	own := s.Run.World
	var place *executor.Place
	switch {
	case set["rank"]:
		if !set["world"] {
			return nil, usagef("--rank %d needs --world W, the number of ranks", f.ranking.rank)
		}
		p, err := comm.Explicit(f.ranking.rank, f.ranking.world, getenv)
		if err != nil {
			return nil, usagef("--rank %d --world %d: %v", f.ranking.rank, f.ranking.world, err)
		}
		place = &p
	case !set["world"]:
		p, ok, err := comm.Discover(getenv)
		if err != nil {
			return nil, usagef("%v", err)
		}
		if ok && p.World > 1 {
			if own > 1 && own != p.World {
				return nil, usagef("%s sets run.world: %d, but %s started a world of %d processes", s.File, own, p.Launcher, p.World)
			}
			if p.World > maxWorld {
				return nil, usagef("%s started a world of %d processes; at most %d ranks", p.Launcher, p.World, maxWorld)
			}
			place = &p
		}
	}
	if place != nil {
		return &rankMode{world: place.World, place: place}, nil
	}
	world := own
	if set["world"] {
		world = f.ranking.world
	}
	if world < 1 || (world == 1 && own <= 1) {
		// One rank, as the spec was loaded: an ordinary run.
		return nil, nil
	}
	return &rankMode{world: world}, nil
}

// maxWorld bounds the ranks of one world: each is a session with its own
// goroutines, and in one process its own device.
const maxWorld = 1024

// rankReport is one rank's outputs in a run's report, and with
// --perf-model its estimate against the measured makespan and its model.
type rankReport struct {
	Rank      int                 `json:"rank"`
	Outputs   []spec.OutputResult `json:"outputs"`
	Saves     []spec.SavedFile    `json:"saves,omitempty"`
	Makespan  *profile.Makespan   `json:"makespan,omitempty"`
	PerfModel *profile.Update     `json:"perf_model,omitempty"`
}

// worldReport is what dagrun run prints for a run of ranks, as JSON with
// --format json.
type worldReport struct {
	SchemaVersion int          `json:"schema_version"`
	Spec          string       `json:"spec"`
	Backend       string       `json:"backend"`
	World         int          `json:"world"`
	Processes     bool         `json:"processes"` // one rank per process: Ranks holds this process's
	Addr          string       `json:"rendezvous,omitempty"`
	Repeat        int          `json:"repeat"`
	Ops           int          `json:"ops"` // of one rank
	Streams       int          `json:"streams"`
	Waits         int          `json:"waits"`
	WallNS        int64        `json:"wall_ns"`
	Graph         bool         `json:"graph,omitempty"`
	Ranks         []rankReport `json:"ranks"`
}

// runRanks runs the ranks of su, opened by openRun, and reports every
// rank's outputs.
func (c *cli) runRanks(f *runFlags, su *runSetup, m *rankMode) error {
	asJSON := f.format.value == "json"
	b, rs, traced, untraced := su.b, su.ranks, su.traced, su.faults
	if f.set["rank-timeout"] {
		untraced = append(untraced, executor.WithRankTimeout(f.ranking.timeout))
	}
	opts := slices.Clone(untraced)
	if f.traceFile != "" || f.perfModel != "" {
		opts = append(opts, executor.WithTiming())
	}
	ctx := c.interruptContext()

	if f.graph {
		opts = append(opts, executor.WithGraph(executor.GraphAlways))
	}
	if f.traceFile != "" {
		opts = append(opts, executor.WithTraceRuns(traced))
	}
	if f.perfModel != "" {
		opts = append(opts, learn(rs, f.repeat, true))
	}
	rn, err := openRanks(ctx, c.stderr, b, rs, m.place, opts)
	if err != nil {
		return c.rankFailure(ctx, rs, err, interruptedAt{})
	}
	run, err := rn.Run(ctx, f.repeat)
	for i, r := range rs {
		r.runs = run.Traced[i]
	}
	since := run.Start.Sub(rn.Opened())
	if err != nil {
		// An interrupt keeps the traces of the runs that completed.
		at := interruptedAt{done: run.Runs, repeat: f.repeat}
		if ctx.Err() != nil && f.traceFile != "" {
			var written bytes.Buffer
			if werr := writeRankTraces(&written, f.traceFile, rs, m.world, since); werr != nil {
				at.trace = fmt.Sprintf("the traces of the runs that completed could not be written: %v", werr)
			} else {
				at.trace = "the traces of the runs that completed were written: " + strings.ReplaceAll(strings.TrimSpace(written.String()), "\n", "; ")
			}
		}
		return c.rankFailure(ctx, rs, errors.Join(err, rn.Close()), at)
	}
	rep := worldReport{SchemaVersion: schemaVersion, Spec: rs[0].s.File, Backend: su.used, World: m.world, Processes: m.place != nil,
		Repeat: f.repeat, Ops: rs[0].p.Stats.Ops, Streams: rs[0].p.Stats.Streams, Waits: rs[0].p.Stats.Waits,
		WallNS: run.Wall.Nanoseconds(), Graph: f.graph}
	if m.place != nil {
		rep.Addr = m.place.Addr
	}
	for i, r := range rs {
		outs, sums, err := r.s.ReadOutputs(rn.Session(i).Read)
		if err != nil {
			return errors.Join(fmt.Errorf("rank %d: %w", r.rank, err), rn.Close())
		}
		sums()
		rr := rankReport{Rank: r.rank, Outputs: outs, Saves: r.s.SavedFiles()}
		rep.Ranks = append(rep.Ranks, rr)
	}
	if err := rn.Close(); err != nil {
		return err
	}
	if f.perfModel != "" {
		if err := hostRunsWorld(ctx, c.stderr, b, rs, m.place, f.repeat, untraced, c.newProgress(f.repeat, true)); err != nil {
			return c.rankFailure(ctx, rs, err, interruptedAt{done: f.repeat, repeat: f.repeat})
		}
		for i, r := range rs {
			rep.Ranks[i].Makespan = makespanOf(r.p, r.pm.Model, nil, r.pm.Eager())
			pr, err := r.pm.Save()
			if err != nil {
				return fmt.Errorf("rank %d: %w", r.rank, err)
			}
			rep.Ranks[i].PerfModel = &pr
		}
	}
	var traces bytes.Buffer
	if f.traceFile != "" {
		if err := writeRankTraces(&traces, f.traceFile, rs, m.world, since); err != nil {
			return err
		}
	}
	if asJSON {
		if _, err := traces.WriteTo(c.stderr); err != nil {
			return err
		}
		return c.writeOutput(f.out, func(w io.Writer) error { return writeJSON(w, rep) })
	}
	return c.writeOutput(f.out, func(w io.Writer) error {
		if err := printWorldReport(w, rep); err != nil {
			return err
		}
		for i, r := range rs {
			if r.pm != nil {
				writePerfModel(w, fmt.Sprintf("rank %d ", r.rank), r.pm, rep.Ranks[i].Makespan, rep.Ranks[i].PerfModel)
			}
		}
		_, err := traces.WriteTo(w)
		return err
	})
}

// hostRunsWorld is hostRuns for ranks: the world (or, with place, this
// process's rank of it, meeting the others at a second rendezvous) run
// repeat more times untraced, each rank's submission timed, each run's wall
// time its ranks' measured makespan (the ranks run together).
func hostRunsWorld(ctx context.Context, stderr io.Writer, b device.Backend, rs []*rankRun, place *executor.Place, repeat int, opts []executor.Option, bar *progress.Bar) error {
	specs := make([]*spec.Spec, len(rs))
	for i, r := range rs {
		specs[i] = r.s
	}
	return timeUntraced(ctx, repeat, specs, bar, func(opts ...executor.Option) (*executor.Runner, error) {
		return openRanks(ctx, stderr, b, rs, place, append(opts, learn(rs, repeat, true)))
	}, opts)
}

// openRanks opens the runner of the ranks rs: every rank of a world in this
// process, or with place this process's rank of a world of processes.
func openRanks(ctx context.Context, stderr io.Writer, b device.Backend, rs []*rankRun, place *executor.Place, opts []executor.Option) (*executor.Runner, error) {
	if place != nil {
		return executor.JoinRunner(ctx, b, rs[0].p, *place, append(slices.Clone(opts), rankWaiting(stderr, place.Rank))...)
	}
	plans := make([]*planner.Plan, len(rs))
	for i, r := range rs {
		plans[i] = r.p
	}
	return executor.NewWorldRunner(ctx, b, plans, opts...)
}

func printWorldReport(w io.Writer, r worldReport) error {
	bw := bufio.NewWriter(w)
	for _, rr := range r.Ranks {
		for _, o := range rr.Outputs {
			fmt.Fprintf(bw, "rank %d output %s: bytes=%d sum=%s fnv=%s\n", rr.Rank, o.Buffer, o.Bytes,
				strconv.FormatFloat(float64(o.Sum), 'g', -1, 64), o.FNV)
			if o.Saved != "" {
				fmt.Fprintf(bw, "rank %d saved %s to %s\n", rr.Rank, o.Buffer, o.Saved)
			}
		}
		for _, sv := range rr.Saves {
			fmt.Fprintf(bw, "rank %d %s\n", rr.Rank, sv)
		}
	}
	how := fmt.Sprintf("%d ranks in one process", r.World)
	if r.Processes {
		how = fmt.Sprintf("rank %d of %d processes (rendezvous at %s)", r.Ranks[0].Rank, r.World, r.Addr)
	}
	runs := "1 run"
	if r.Repeat > 1 {
		runs = fmt.Sprintf("%d runs (%s each)", r.Repeat, short(r.WallNS/int64(r.Repeat)))
	}
	if r.Graph {
		runs += " (the first eager, then replays of a graph captured after it)"
	}
	fmt.Fprintf(bw, "ran %s on %s as %s: %s, %s, %s per rank, %s in %s\n",
		human.Quote(r.Spec), r.Backend, how, human.Count(r.Ops, "op", "ops"), human.Count(r.Streams, "stream", "streams"),
		human.Count(r.Waits, "wait", "waits"), runs, short(r.WallNS))
	return bw.Flush()
}

// writeRankTraces writes each rank's trace of the runs it kept to file
// ({rank} expanded), whole or not at all, the runs started since after the
// rendezvous, and a line for each to w.
func writeRankTraces(w io.Writer, file string, rs []*rankRun, world int, since time.Duration) error {
	for _, r := range rs {
		t := trace.FromRuns(r.p, r.runs)
		t.Rank = &trace.RankClock{Rank: r.rank, World: world, Offset: since + earliest(r.runs)}
		path := spec.ExpandRank(file, r.rank)
		if err := writeFileAtomic(path, t.WriteChrome); err != nil {
			return err
		}
		fmt.Fprintf(w, "trace of rank %d written to %s\n", r.rank, path)
	}
	return nil
}

// rankFailure is the failure of a run of ranks: the failing op placed in
// its rank's spec, with the rank named.
func (c *cli) rankFailure(ctx context.Context, rs []*rankRun, err error, at interruptedAt) error {
	s := rs[0].s
	prefix := ""
	if re, ok := errors.AsType[*executor.RankError](err); ok {
		for _, r := range rs {
			if r.rank == re.Rank {
				s = r.s
			}
		}
		prefix = fmt.Sprintf("rank %d: ", re.Rank)
	}
	fe := c.runFailure(ctx, s, err, nil, at)
	fl, ok := fe.(*failure)
	if !ok {
		return fe
	}
	for i := range fl.errors {
		if fl.errors[i].Op != "" && !strings.HasPrefix(fl.errors[i].Message, prefix) {
			fl.errors[i].Message = prefix + fl.errors[i].Message
		}
	}
	if len(rs) == 1 && len(fl.errors) == 1 && fl.errors[0].Op == "" && errors.Is(err, comm.ErrMismatch) {
		// The ranks disagree on their collectives: place the first one
		// that differs in this rank's spec.
		if m := collectiveIndex.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			if op := nthCollective(s.Graph, n); op != nil {
				fl.errors[0] = s.OpProblem(op.Name, err.Error())
			}
		}
	}
	return fl
}

// collectiveIndex finds the number of the first collective the ranks
// disagree on in internal/comm's error.
var collectiveIndex = regexp.MustCompile(`(?:differ at|its) #(\d+)`)

// nthCollective is the n-th (from 1) op of g's collective sequence.
func nthCollective(g *dag.Graph, n int) *dag.Op {
	for _, op := range g.Ops {
		if !op.Kind.IsCollective() || op.Kind == dag.Send || op.Kind == dag.Recv {
			continue
		}
		if n--; n == 0 {
			return op
		}
	}
	return nil
}

// loadRank loads the spec at path as rank's program in a world of world
// ranks.
func (c *cli) loadRank(path string, o specFiles, rank, world int) (*spec.Spec, error) {
	o.extra = []spec.Option{spec.WithRank(rank, world)}
	return c.load(path, o)
}

// moveToDevice puts the device buffers and the ops of g on device d. A
// spec that runs as several ranks places nothing itself (the loader
// refuses device: there), so everything is on device 0 until then.
func moveToDevice(g *dag.Graph, d int) {
	for _, b := range g.Buffers {
		if b.Placement == dag.Device {
			b.Device = d
		}
	}
	for _, op := range g.Ops {
		op.Device = d
	}
}

// localDevice is the device of the process of local rank local: local
// modulo the devices CUDA_VISIBLE_DEVICES leaves (all of them when it is
// unset, since ranks then share the machine's devices in order).
func localDevice(local int, getenv func(string) string) int {
	v := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES"))
	if v == "" {
		return local
	}
	n := len(strings.Split(v, ","))
	return local % n
}

// earliest is when the first of the runs' spans started, from the start of
// the runs: the time zero of their trace (trace.FromRuns).
func earliest(runs []trace.RunSpans) time.Duration {
	var first time.Duration
	found := false
	for _, r := range runs {
		for _, sp := range r.Spans {
			if at := r.Start + sp.Start; !found || at < first {
				first, found = at, true
			}
		}
	}
	return first
}

// vizRanks draws the traces of several ranks as one timeline.
func (c *cli) vizRanks(inputs []string, out, format string) error {
	if out == "" {
		return usagef("-o FILE is required")
	}
	ext := format
	if ext == "" {
		if out == stdio {
			return usagef("-o - needs --format svg or html")
		}
		ext = strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
	}
	if ext != "svg" && ext != "html" {
		return usagef("traces draw as .svg or .html, %s", notExt(out, ext, "svg"))
	}
	var reads []fileUse
	for _, in := range inputs {
		reads = append(reads, fileUse{in, "an input of viz"})
	}
	if err := checkFileUses(reads, []fileUse{{out, "-o"}}); err != nil {
		return err
	}
	var traces []*trace.Trace
	for _, in := range inputs {
		if in == stdio {
			return usagef("several traces are read from files, not standard input")
		}
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		t, err := trace.ReadChrome(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", human.Quote(in), err)
		}
		if t.Rank == nil {
			return usagef("%s is not the trace of a rank: several traces are merged only when each is one rank's (dagrun run --trace of a world)", in)
		}
		traces = append(traces, t)
	}
	m, err := trace.MergeRanks(traces)
	if err != nil {
		return err
	}
	draw := m.WriteSVG
	if ext == "html" {
		draw = m.WriteHTML
	}
	return c.writeOutputInterruptible(out, draw)
}

// rankLines writes what one rank's host steps print, line by line, each
// line after prefix ("rank 1 "), so that the ranks' lines neither tear nor
// lose their rank. Lines of all ranks share mu.
type rankLines struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
	part   []byte // a line not yet ended
}

func (l *rankLines) Write(p []byte) (int, error) {
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.mu.Lock()
		_, err := io.WriteString(l.w, l.prefix+string(l.part[:i+1]))
		l.mu.Unlock()
		l.part = l.part[i+1:]
		if err != nil {
			return len(p), err
		}
	}
}

// rankWaiting makes a rank say on stderr whom its rendezvous waits for,
// every few seconds, as torchrun does: a rank that waits in silence looks
// hung.
func rankWaiting(stderr io.Writer, rank int) executor.Option {
	return executor.WithRankWaiting(func(missing []int, waited time.Duration) {
		who := make([]string, len(missing))
		for i, r := range missing {
			who[i] = strconv.Itoa(r)
		}
		s := ""
		if len(missing) > 1 {
			s = "s"
		}
		fmt.Fprintf(stderr, "dagrun run: rank %d: waiting for rank%s %s (%s so far; --rank-timeout bounds it)\n",
			rank, s, strings.Join(who, ", "), human.Duration(waited.Round(time.Second)))
	})
}
