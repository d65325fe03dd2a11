package executor

import (
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Profiling: the host's cost of each submission step, and the timing source.

// profile is the profiling part of a session's config.
type profile struct {
	submitTiming bool
	timingSource string
}

// WithSubmitTiming asks the session to time, on the host, every backend
// call of a run's submission (each op's Run, each event Record and stream
// Wait): what a perf model learns the host's submission cost from
// (Session.SubmitCosts). It costs two clock reads per step.
func WithSubmitTiming() Option { return func(c *config) { c.submitTiming = true } }

// WithTimingSource passes src to a device session that can choose how it
// times ops (the cuda backend's "auto", "cupti" or "events"); sessions that
// cannot ignore it. It implies nothing unless WithTiming is given too.
// Without it a session times ops its backend's default way (events on
// cuda). Under CUPTI, ops with no device work of their own (host steps,
// frees, pool allocations) have no span.
func WithTimingSource(src string) Option { return func(c *config) { c.timingSource = src } }

// SubmitCost is the host's time to submit the steps of one kind in the
// last run: their count and total.
type SubmitCost struct {
	Count int
	Total time.Duration
}

// Mean is the mean time per step, zero without steps.
func (c SubmitCost) Mean() time.Duration {
	if c.Count == 0 {
		return 0
	}
	return c.Total / time.Duration(c.Count)
}

// SubmitCosts are the host's submission costs of the last run, by op kind
// for ops and for event records and waits.
type SubmitCosts struct {
	Ops     map[dag.OpKind]SubmitCost
	Records SubmitCost
	Waits   SubmitCost
}

// submitTimer wraps a device session for the submission loop, timing each
// call on the host.
type submitTimer struct {
	device.Session
	costs SubmitCosts
}

func newSubmitTimer(d device.Session) *submitTimer {
	return &submitTimer{Session: d, costs: SubmitCosts{Ops: map[dag.OpKind]SubmitCost{}}}
}

func (t *submitTimer) reset() {
	clear(t.costs.Ops)
	t.costs.Records, t.costs.Waits = SubmitCost{}, SubmitCost{}
}

func (t *submitTimer) Run(stream int, op *dag.Op) error {
	start := time.Now()
	err := t.Session.Run(stream, op)
	c := t.costs.Ops[op.Kind]
	c.Count++
	c.Total += time.Since(start)
	t.costs.Ops[op.Kind] = c
	return err
}

func (t *submitTimer) Record(stream, event int) error {
	start := time.Now()
	err := t.Session.Record(stream, event)
	t.costs.Records.Count++
	t.costs.Records.Total += time.Since(start)
	return err
}

func (t *submitTimer) Wait(stream, event int) error {
	start := time.Now()
	err := t.Session.Wait(stream, event)
	t.costs.Waits.Count++
	t.costs.Waits.Total += time.Since(start)
	return err
}

// submitter is what the submission loop calls: the device session, or the
// timer around it (reset for the run) when submission timing was asked for.
func (s *Session) submitter() submitSession {
	if s.subTimer == nil {
		return s.d
	}
	s.subTimer.reset()
	return s.subTimer
}

// submitSession is the part of a device session that submission calls.
type submitSession interface {
	Run(stream int, op *dag.Op) error
	Record(stream, event int) error
	Wait(stream, event int) error
}

// SubmitCosts returns the host's submission costs of the last Run, if the
// session was opened WithSubmitTiming; otherwise ok is false.
func (s *Session) SubmitCosts() (costs SubmitCosts, ok bool) {
	if s.subTimer == nil {
		return SubmitCosts{}, false
	}
	c := s.subTimer.costs
	ops := make(map[dag.OpKind]SubmitCost, len(c.Ops))
	for k, v := range c.Ops {
		ops[k] = v
	}
	c.Ops = ops
	return c, true
}

// timingSourcer is implemented by device sessions that can choose how they
// time ops (cuda.Session).
type timingSourcer interface {
	SetTimingSource(src string) error
	TimingSource() (source, why string, dropped uint64)
}

// setupProfile applies the profiling options once the device session is
// open, before its streams are made.
func (s *Session) setupProfile(cfg config) error {
	if cfg.submitTiming {
		s.subTimer = newSubmitTimer(s.d)
	}
	if ts, ok := s.d.(timingSourcer); ok && s.timer != nil && cfg.timingSource != "" {
		return ts.SetTimingSource(cfg.timingSource)
	}
	return nil
}

// TimingSource says how the session times ops: the device session's own
// account where it has one ("cupti" or "events" on cuda, with the reason
// and the count of records dropped), "timers" for a backend that times ops
// with its own clock (the cpu backend), "" when timing is off.
func (s *Session) TimingSource() (source, why string, dropped uint64) {
	if s.timer == nil {
		return "", "timing is off", 0
	}
	if ts, ok := s.d.(timingSourcer); ok {
		return ts.TimingSource()
	}
	return "timers", "the backend times ops with its own clock", 0
}

// Spans returns when each op of the replays synchronised since the last
// call ran, if the session was opened WithTiming and its backend times
// replayed ops (the cpu backend does, from its own timers; a CUDA graph's
// ops are not timed one by one); otherwise nil. Call it after Sync, once
// per replay to have each replay's spans on their own.
func (g *Graph) Spans() []Span {
	if g.closed || g.s.timer == nil {
		return nil
	}
	var spans []Span
	_ = g.s.timer.Spans(func(op, stream int, start, end time.Duration) {
		spans = append(spans, Span{Op: op, Stream: stream, Start: start, End: end})
	})
	return spans
}
