package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// A Runner runs a plan again and again, as a program's main loop or the
// dagrun command does: eagerly, or replaying a graph captured once or
// automatically after a few identical eager runs, with the replays
// launched in batches; it keeps the op times of the runs asked for, hands
// each run's measures to an observer (a perf model), and when its context
// ends returns a Report of the runs that completed.

// GraphMode says when a Runner replays a captured graph.
type GraphMode uint8

const (
	// GraphNever runs every run eagerly.
	GraphNever GraphMode = iota
	// GraphAuto runs eagerly and, after DefaultAutoCapture identical
	// runs, replays a graph captured then (WithAutoCapture), where the plan
	// and the backend allow it; Report.Log says which runs were replays or
	// why none were. Ranks stay eager.
	GraphAuto
	// GraphAlways captures the plan at the first Run and replays it at
	// every run. Ranks run the first run eagerly and capture after it:
	// NCCL connects the ranks at their first collectives, which a graph
	// cannot hold.
	GraphAlways
)

var graphModeNames = [...]string{GraphNever: "never", GraphAuto: "auto", GraphAlways: "always"}

// String is the mode's name: never, auto or always.
func (m GraphMode) String() string {
	if int(m) < len(graphModeNames) {
		return graphModeNames[m]
	}
	return fmt.Sprintf("GraphMode(%d)", m)
}

// ParseGraphMode returns the mode named s: never, auto or always.
func ParseGraphMode(s string) (GraphMode, bool) {
	for i, n := range graphModeNames {
		if n == s {
			return GraphMode(i), true
		}
	}
	return 0, false
}

// Defaults of WithReplayBatch.
const (
	DefaultReplayBatch  = 64
	DefaultReplayWindow = 100 * time.Millisecond
)

// runnerConfig is a Runner's part of the options.
type runnerConfig struct {
	graph        GraphMode
	graphSet     bool // WithGraph was given (a Shapes captures unless it says GraphNever)
	traced       func(run int) bool
	wholeReplays bool
	progress     func(done int)
	opsProgress  func(run, done, ops int)
	observe      func(Observation) error
	batch        int
	window       time.Duration
}

// WithGraph makes a Runner capture and replay as m says (GraphNever by
// default). GraphAuto also makes the session capture automatically
// (WithAutoCapture(DefaultAutoCapture)), unless WithAutoCapture comes
// after it.
func WithGraph(m GraphMode) Option {
	return func(c *config) {
		c.runner.graph, c.runner.graphSet = m, true
		if m == GraphAuto && c.auto == 0 {
			c.auto = DefaultAutoCapture
		}
	}
}

// WithTraceRuns makes a Runner keep the op times of the runs (counted from
// 1 over all its Run calls) that traced chooses, eager runs and replays
// alike (Report.Traced, Report.Whole). Give WithTiming too: without it, or
// on a backend that cannot time a replay's ops, each traced replay is
// launched alone and timed whole on the host's clock, and eager runs keep
// no spans.
func WithTraceRuns(traced func(run int) bool) Option {
	return func(c *config) { c.runner.traced = traced }
}

// WithWholeReplays makes a Runner keep each traced replay whole, from its
// first op's start to its last op's end, rather than op by op.
func WithWholeReplays() Option { return func(c *config) { c.runner.wholeReplays = true } }

// WithProgress makes a Runner call f with the runs done so far, after each
// eager run and each batch of replays.
func WithProgress(f func(done int)) Option { return func(c *config) { c.runner.progress = f } }

// WithOpsProgress makes a Runner call f a few times a second during an
// eager run with its number, its ops done and its ops in all, where the
// backend's session counts the ops it ran (the cpu backend's OpsDone).
func WithOpsProgress(f func(run, done, ops int)) Option {
	return func(c *config) { c.runner.opsProgress = f }
}

// WithObserver makes a Runner call f after each eager run of each session
// (each rank in this process), for what learns from runs: a perf model
// learns op durations from Spans (with WithTiming), and the host's costs
// from Wall and the session's SubmitCosts (with WithSubmitTiming). An
// error stops the runs.
func WithObserver(f func(Observation) error) Option {
	return func(c *config) { c.runner.observe = f }
}

// WithReplayBatch makes a Runner launch replays in batches of at most n
// (default DefaultReplayBatch) and at most about window of work, judged by
// the replays so far (default DefaultReplayWindow), then wait for them:
// the replays of a batch run back to back, and between batches a failing
// op is reported and progress moves.
func WithReplayBatch(n int, window time.Duration) Option {
	return func(c *config) { c.runner.batch, c.runner.window = n, window }
}

// Observation is what one eager run of one session measured.
type Observation struct {
	Rank    int // the session's index in the Runner: the rank in this process, 0 for one session
	Run     int // counted from 1
	Session *Session
	Spans   []Span        // the run's op spans; nil without timing
	Wall    time.Duration // from the run's start to its end, on the host
}

// RunSpans are the op times of one run (counted from 1) of a plan. Start is
// when the run started, on the host's clock from the first run's start;
// the spans are measured from the run's own start.
type RunSpans struct {
	Run   int
	Start time.Duration
	Spans []Span
}

// WholeReplay is one graph replay traced whole: its run's number, its start
// on the runs' clock (RunSpans.Start's) and how long it took.
type WholeReplay struct {
	Run   int
	Start time.Duration
	Dur   time.Duration
}

// Report is what a Runner's Run did, complete or not: after an error or an
// interrupt it holds the runs that completed before it.
type Report struct {
	Repeat int // the runs asked for
	Runs   int // the runs that completed
	// Wall is the runs' time on the host: for one plan under GraphAlways
	// the replays' alone (the capture is in Replays), else every run's
	// (for ranks under GraphAlways, the first eager run and the capture
	// with the replays: Replays has the replays' alone).
	Wall time.Duration
	// Replays are the figures of the graph replayed; nil when no run was
	// a replay.
	Replays *ReplayReport
	// Log is how the runs ran (GraphAuto: which were replays, or why none
	// were).
	Log RunLog
	// Traced are the runs WithTraceRuns chose, kept op by op: one list per
	// session of the Runner (per rank in this process).
	Traced [][]RunSpans
	// Whole are the traced replays kept whole (WithWholeReplays, or where
	// the backend could not time their ops), and WholeTiming says how they
	// were timed.
	Whole       []WholeReplay
	WholeTiming string
	// Start is when the runs started, the origin of the spans' Start.
	Start time.Time
}

// TracedRuns are the numbers of the runs traced, op by op or whole, in
// order.
func (r *Report) TracedRuns() []int {
	var n []int
	for _, rs := range r.Traced {
		for _, t := range rs {
			n = append(n, t.Run)
		}
		break // every session traces the same runs
	}
	for _, w := range r.Whole {
		n = append(n, w.Run)
	}
	slices.Sort(n)
	return n
}

// Runner runs a plan, or the ranks of a world, many times: eagerly or
// replaying a graph (WithGraph), keeping the op times of the runs asked for
// (WithTraceRuns), telling an observer what each eager run measured
// (WithObserver) and progress as it goes (WithProgress), launching
// replays in batches (WithReplayBatch). Like a Session it is for one
// goroutine; Close is safe from any.
type Runner struct {
	cfg      runnerConfig
	sessions []*Session
	world    *World                      // NewWorldRunner
	rank     *Rank                       // JoinRunner
	graph    *Graph                      // GraphAlways: captured by the first Run
	replay   func(context.Context) error // ranks after their capture
	graphs   []*Graph                    // ranks: each rank's graph in this process, after the capture
	closeG   func() error
	opened   time.Time
	runs     int // runs done, over every Run
	closeErr error
	closing  sync.Once
}

// NewRunner opens plan p on backend b (Open, with opts) for a Runner.
func NewRunner(ctx context.Context, b device.Backend, p *planner.Plan, opts ...Option) (*Runner, error) {
	s, err := Open(ctx, b, p, opts...)
	if err != nil {
		return nil, err
	}
	return newRunner([]*Session{s}, opts), nil
}

// NewWorldRunner opens plans as the ranks of a world in this process
// (OpenWorld, with opts) for a Runner.
func NewWorldRunner(ctx context.Context, b device.Backend, plans []*planner.Plan, opts ...Option) (*Runner, error) {
	w, err := OpenWorld(ctx, b, plans, append(slices.Clone(opts), eagerRanks)...)
	if err != nil {
		return nil, err
	}
	r := newRunner(w.ranks, opts)
	r.world, r.opened = w, w.Opened()
	return r, nil
}

// JoinRunner joins plan p to a world of processes as the rank place says
// (JoinWorld, with opts) for a Runner.
func JoinRunner(ctx context.Context, b device.Backend, p *planner.Plan, place Place, opts ...Option) (*Runner, error) {
	rk, err := JoinWorld(ctx, b, p, place, append(slices.Clone(opts), eagerRanks)...)
	if err != nil {
		return nil, err
	}
	r := newRunner([]*Session{rk.Session()}, opts)
	r.rank, r.opened = rk, rk.Rendezvous()
	return r, nil
}

// eagerRanks keeps ranks from capturing automatically, each on its own:
// under GraphAuto they stay eager.
func eagerRanks(c *config) { c.auto = 0 }

func newRunner(ss []*Session, opts []Option) *Runner {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.runner.batch < 1 {
		c.runner.batch = DefaultReplayBatch
	}
	if c.runner.window <= 0 {
		c.runner.window = DefaultReplayWindow
	}
	return &Runner{cfg: c.runner, sessions: ss, opened: time.Now()}
}

// Session returns the session of rank i in this process (0 for a Runner of
// one plan): for Read, Write, RunLog and the measures between runs.
func (r *Runner) Session(i int) *Session { return r.sessions[i] }

// Sessions is the number of sessions: the ranks in this process, or 1.
func (r *Runner) Sessions() int { return len(r.sessions) }

// Opened is when the Runner's sessions were open (a world's ranks all
// joined, a rank out of its rendezvous): the common origin of ranks'
// traces.
func (r *Runner) Opened() time.Time { return r.opened }

// Run runs the plan n more times as the Runner's options say and reports
// what ran. On error, including the end of ctx, the report holds the runs
// that completed; the run in flight was abandoned and, for ranks, the
// world cannot run again.
func (r *Runner) Run(ctx context.Context, n int) (*Report, error) {
	rep := &Report{Repeat: n, Traced: make([][]RunSpans, len(r.sessions)), Start: time.Now()}
	var err error
	switch {
	case r.world != nil || r.rank != nil:
		err = r.runRanks(ctx, n, rep) // runner_world.go
	case r.cfg.graph == GraphAlways:
		err = r.replayAll(ctx, n, rep) // runner_replay.go
	default:
		err = r.runEager(ctx, n, rep)
	}
	rep.Log = r.sessions[0].RunLog()
	return rep, err
}

// runEager runs n runs eagerly, or under GraphAuto until the session has
// captured, then the rest as replays launched in batches.
func (r *Runner) runEager(ctx context.Context, n int, rep *Report) error {
	s := r.sessions[0]
	defer func() { rep.Wall = time.Since(rep.Start) }()
	for i := range n {
		if g := s.AutoGraph(); g != nil && r.cfg.graph == GraphAuto {
			return r.replayRest(ctx, g, rep, i)
		}
		runStart := time.Since(rep.Start)
		stop := r.watchOps(s, r.runs+1)
		err := s.Run(ctx)
		stop()
		if err != nil {
			return err
		}
		// The run that captured automatically replayed the capture.
		eager := s.AutoGraph() == nil
		if err := r.done(rep, runStart, time.Since(rep.Start)-runStart, []*Session{s}, eager); err != nil {
			return err
		}
	}
	return nil
}

// done counts a run of ss that started at start and took wall, keeping
// its spans and, if it was eager, telling the observer.
func (r *Runner) done(rep *Report, start, wall time.Duration, ss []*Session, eager bool) error {
	r.runs++
	rep.Runs++
	for i, s := range ss {
		spans := s.Spans()
		if r.cfg.traced != nil && r.cfg.traced(r.runs) {
			rep.Traced[i] = append(rep.Traced[i], RunSpans{Run: r.runs, Start: start, Spans: spans})
		}
		if r.cfg.observe != nil && eager {
			o := Observation{Rank: i, Run: r.runs, Session: s, Spans: spans, Wall: wall}
			if err := r.cfg.observe(o); err != nil {
				return fmt.Errorf("executor: observing run %d: %w", r.runs, err)
			}
		}
	}
	r.progress(r.runs)
	return nil
}

func (r *Runner) progress(done int) {
	if r.cfg.progress != nil {
		r.cfg.progress(done)
	}
}

// opsEvery is how often WithOpsProgress's function is called.
const opsEvery = 200 * time.Millisecond

// watchOps calls the WithOpsProgress function while run number run of s is
// in flight, where s's device session counts ops; stop ends the watch.
func (r *Runner) watchOps(s *Session, run int) (stop func()) {
	oc, ok := s.d.(device.OpCounter)
	if !ok || r.cfg.opsProgress == nil {
		return func() {}
	}
	ops := len(s.p.Graph.Ops)
	base := oc.OpsDone()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(opsEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.cfg.opsProgress(run, min(int(oc.OpsDone()-base), ops), ops)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// Close closes the Runner's graph and its sessions (or world, or rank).
// It is safe from any goroutine, and a second Close returns the first's
// error.
func (r *Runner) Close() error {
	r.closing.Do(func() {
		var errs []error
		if r.closeG != nil {
			errs = append(errs, r.closeG())
		}
		switch {
		case r.world != nil:
			errs = append(errs, r.world.Close())
		case r.rank != nil:
			errs = append(errs, r.rank.Close())
		default:
			errs = append(errs, r.sessions[0].Close())
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
