package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Automatic capture: a session that runs the same plan eagerly again and
// again captures it after a few identical runs and replays it from then
// on, so that a caller's loop of Run calls costs one launch a run.

// DefaultAutoCapture is how many identical eager runs a session opened
// WithAutoCapture(0) runs before it captures: enough that one-off and
// few-run sessions pay nothing for a capture they would not amortise.
const DefaultAutoCapture = 3

// WithAutoCapture makes Run capture the plan after n identical eager runs
// in a row (n < 1: DefaultAutoCapture) and replay the captured graph at
// every Run from then on. Runs are identical while no Update changes
// what they submit; Write only changes buffer contents, which replays
// read as eager runs do. A plan a graph cannot hold (CheckCapture), a
// backend that cannot capture, or faults injected into eager runs keep the
// session eager; RunLog says why. Replays compute what eager runs compute.
func WithAutoCapture(n int) Option {
	return func(c *config) {
		if n < 1 {
			n = DefaultAutoCapture
		}
		c.auto = n
	}
}

// autoCapture is a session's automatic capture, its record of the runs,
// and the changes Session.Update made to them: of plan p, opened as d,
// where faults are injected into eager runs or not.
type autoCapture struct {
	d         device.Session
	p         *planner.Plan
	injected  bool
	after     int    // identical eager runs before capture; 0: never
	identical int    // eager runs in a row since the last change
	g         *Graph // captured automatically; nil before
	why       error  // why the session stays eager; nil while it may capture
	vars      *Graph // not captured: the changes in effect for eager runs; nil: none
	log       RunLog
}

// ops is what each op of an eager run is submitted as.
func (a *autoCapture) ops() []*dag.Op {
	if a.vars == nil {
		return a.p.Graph.Ops
	}
	return a.vars.ops
}

// eagerFailed notes a failed eager run: the runs in a row start again.
func (a *autoCapture) eagerFailed() { a.identical = 0 }

// noteRuns logs n runs done, eager or replayed.
func (a *autoCapture) noteRuns(n int, replayed bool) {
	if !replayed {
		a.identical += n
	}
	l := &a.log
	first := 1
	if k := len(l.Ranges); k > 0 {
		last := &l.Ranges[k-1]
		if last.Replayed == replayed {
			last.Last += n
			return
		}
		first = last.Last + 1
	}
	l.Ranges = append(l.Ranges, RunRange{First: first, Last: first + n - 1, Replayed: replayed})
}

// run replays the automatically captured graph, capturing it first (with
// capture, the session's) when the session has run enough identical eager
// runs, and hands the replay's spans to spans. It reports whether it
// replayed (and the replay's error); if not, Run runs eagerly. The caller
// holds the session's flight.
func (a *autoCapture) run(ctx context.Context, capture func(context.Context, *Graph) (*Graph, error), spans func(*Graph)) (replayed bool, err error) {
	if a.g == nil {
		if a.after == 0 || a.why != nil || a.identical < a.after {
			return false, nil
		}
		if a.why = a.capturable(); a.why != nil {
			return false, nil
		}
		g, err := capture(ctx, a.vars)
		if err != nil {
			if ctx.Err() != nil {
				return true, err
			}
			a.why = err // the backend could not: stay eager
			return false, nil
		}
		g.auto = true
		a.g, a.log.CapturedAfter = g, a.identical
	}
	g := a.g
	if g.closed.Load() { // closed by the caller through AutoGraph
		a.g, a.why = nil, errors.New("the automatically captured graph was closed")
		return false, nil
	}
	if err := g.launch(ctx); err != nil {
		return true, err
	}
	err = g.sync(ctx)
	spans(g)
	return true, err
}

// capturable says why the session's plan cannot be captured
// automatically, or nil.
func (a *autoCapture) capturable() error {
	if _, ok := a.d.(device.Capturer); !ok {
		return fmt.Errorf("the backend's session (%T) cannot capture graphs", a.d)
	}
	if a.injected {
		return errors.New("faults are injected into eager runs only")
	}
	return CheckCapture(a.p)
}

// AutoGraph returns the graph the session captured automatically
// (WithAutoCapture), or nil before it has. Its replays are the session's
// runs: a caller may launch them in batches (Graph.Launch, then Sync)
// rather than one Run at a time, and RunLog counts them. Change it through
// Session.Update, which keeps eager runs and the graph alike.
func (s *Session) AutoGraph() *Graph { return s.auto.g }

// Update applies changes (SetArg, Rebind) to the session's runs from the
// next one on: eager runs submit the changed ops, and a graph the session
// captured automatically is updated as Graph.Update does. A change to what
// eager runs submit starts the count of identical runs before an
// automatic capture again. Graphs made by Capture are not changed: update
// them with Graph.Update. On error nothing changes.
func (s *Session) Update(ctx context.Context, changes ...Change) (err error) {
	if s.unusable() { // zero.go
		return fmt.Errorf("executor: Update: session is %w", device.ErrClosed)
	}
	ctx, end, err := s.flight.begin(ctx, &s.closed, "Update") // close.go
	if err != nil {
		return err
	}
	defer end(&err)
	a := &s.auto
	if a.vars == nil {
		a.vars = s.newGraph(nil)
	}
	if g := a.g; g != nil && !g.closed.Load() {
		if g.pending { // launched through AutoGraph: Graph.Update's own Sync would find this call in flight
			if err := g.sync(ctx); err != nil {
				return fmt.Errorf("executor: Update: waiting for the launched replays: %w", err)
			}
		}
		if err := g.Update(ctx, changes...); err != nil {
			return err
		}
		a.vars.ops, a.vars.state = slices.Clone(g.ops), g.state.clone()
		return nil
	}
	next, ops, err := a.vars.next(changes)
	if err != nil {
		return err
	}
	if !slices.Equal(ops, a.vars.ops) {
		a.identical = 0
	}
	a.vars.ops, a.vars.state = ops, next
	return nil
}

// RunLog is how a session's runs ran: which eagerly and which as replays
// of a graph it captured automatically, and why it did not capture.
type RunLog struct {
	Ranges []RunRange // in order, each of one kind, together every run done
	// CapturedAfter is how many identical eager runs preceded the
	// automatic capture; 0 when there was none.
	CapturedAfter int
	// NotCaptured says why a session asked to capture automatically stays
	// eager; nil when it captured, may still, or was not asked to.
	NotCaptured error
}

// RunRange is runs First to Last (counted from 1), all eager or all
// replays.
type RunRange struct {
	First, Last int
	Replayed    bool
}

// RunLog returns how the session's runs ran so far: eager runs (Run) and
// replays of its automatically captured graph (Run, or launches through
// AutoGraph). Replays of graphs made by Capture are not the session's runs.
func (s *Session) RunLog() RunLog {
	l := s.auto.log
	l.Ranges = slices.Clone(l.Ranges)
	if s.auto.g == nil {
		l.NotCaptured = s.auto.why
	}
	return l
}

// Replayed reports whether run (counted from 1) was a replay.
func (l RunLog) Replayed(run int) bool {
	for _, r := range l.Ranges {
		if r.First <= run && run <= r.Last {
			return r.Replayed
		}
	}
	return false
}

// String says it in a line: "runs 1-3 eager, 4-1000 replayed (captured
// automatically after 3 identical eager runs)".
func (l RunLog) String() string {
	if len(l.Ranges) == 0 {
		return "no runs"
	}
	parts := make([]string, len(l.Ranges))
	for i, r := range l.Ranges {
		kind := "eager"
		if r.Replayed {
			kind = "replayed"
		}
		parts[i] = fmt.Sprintf("%d-%d %s", r.First, r.Last, kind)
		if r.First == r.Last {
			parts[i] = fmt.Sprintf("%d %s", r.First, kind)
		}
	}
	word := "runs "
	if last := l.Ranges[len(l.Ranges)-1]; len(l.Ranges) == 1 && last.First == last.Last {
		word = "run "
	}
	s := word + strings.Join(parts, ", ")
	if l.CapturedAfter > 0 {
		s += fmt.Sprintf(" (captured automatically after %d identical eager %s)", l.CapturedAfter, plural(l.CapturedAfter, "run", "runs"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
