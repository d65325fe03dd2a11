package executor

import (
	"slices"
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
// Wait; a backend that takes steps in stretches, each stretch, shared
// evenly among its steps): what a perf model learns the host's submission
// cost from (Session.SubmitCosts). It costs two clock reads per call.
func WithSubmitTiming() Option { return func(c *config) { c.submitTiming = true } }

// WithTimingSource passes src to a device session that can choose how it
// times ops (the cuda backend's "auto", "cupti", "cupti-graph" or
// "events"); sessions that cannot ignore it. It implies nothing unless
// WithTiming is given too. Without it a session times ops its backend's
// default way (events on cuda). Under CUPTI, ops with no device work of
// their own (host steps, frees, pool allocations) have no span. Under
// "cupti-graph" graph replays are timed as whole graphs (ReplaySpans.Whole)
// from CUPTI's graph-level records, with no per-op spans, which costs the
// device nearly nothing; eager ops are timed by events.
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

// stretch shares d, the time a device.Submitter took to enqueue steps,
// evenly among them: within one call into the backend the steps are not
// timed one by one.
func (t *submitTimer) stretch(steps []device.Step, d time.Duration) {
	if len(steps) == 0 {
		return
	}
	each := d / time.Duration(len(steps))
	for _, st := range steps {
		switch st.Kind {
		case device.RunStep:
			c := t.costs.Ops[st.Op.Kind]
			c.Count++
			c.Total += each
			t.costs.Ops[st.Op.Kind] = c
		case device.RecordStep:
			t.costs.Records.Count++
			t.costs.Records.Total += each
		case device.WaitStep:
			t.costs.Waits.Count++
			t.costs.Waits.Total += each
		}
	}
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

// submitSession is the part of a device session that submission calls.
type submitSession interface {
	Run(stream int, op *dag.Op) error
	Record(stream, event int) error
	Wait(stream, event int) error
}

// SubmitCosts returns the host's submission costs of the last Run, if the
// session was opened WithSubmitTiming; otherwise ok is false.
func (s *Session) SubmitCosts() (costs SubmitCosts, ok bool) {
	if s.sub.timer == nil {
		return SubmitCosts{}, false
	}
	c := s.sub.timer.costs
	ops := make(map[dag.OpKind]SubmitCost, len(c.Ops))
	for k, v := range c.Ops {
		ops[k] = v
	}
	c.Ops = ops
	return c, true
}

// timing is a session's op timing: the device session's timer when timing
// was asked for, the spans of its last run, and the count of graph launches
// that numbers the backend's replays.
type timing struct {
	timer   device.Timer         // nil unless timing was asked for and the session can
	sourcer device.TimingSourcer // nil where the session cannot say how it times
	spans   []Span
	// replays counts the LaunchGraph calls made: the backend's replay
	// numbers.
	replays int
}

// newTiming sets up d's timing as cfg asks, once the device session is
// open and before its streams are made.
func newTiming(d device.Session, cfg config) (timing, error) {
	var t timing
	if tm, ok := d.(device.Timer); ok && cfg.timing {
		tm.SetTiming(true)
		t.timer = tm
	}
	t.sourcer, _ = d.(device.TimingSourcer)
	if t.sourcer != nil && t.timer != nil && cfg.timingSource != "" {
		if err := t.sourcer.SetTimingSource(device.TimingSource(cfg.timingSource)); err != nil {
			return t, err
		}
	}
	return t, nil
}

// collect takes the timed ops of the run from the backend.
func (t *timing) collect() {
	if t.timer == nil {
		return
	}
	// A run that failed may leave the spans unreadable; then there are
	// none to give, which Spans reports as an empty list.
	from := len(t.spans)
	_ = t.timer.Spans(func(op, stream int, start, end time.Duration) {
		t.spans = append(t.spans, Span{Op: op, Stream: stream, Start: start, End: end})
	})
	if lc, ok := t.timer.(device.LoopCounter); ok {
		lc.LoopIterations(func(op, n int) {
			for i := from; i < len(t.spans); i++ {
				if t.spans[i].Op == op {
					t.spans[i].Iterations = n
				}
			}
		})
	}
}

// addReplays adds the spans of g's replays, which are runs of the session
// (autocapture.go).
func (t *timing) addReplays(g *Graph) {
	if t.timer != nil {
		t.spans = append(t.spans, g.Spans()...)
	}
}

// TimingSource says how the session times ops: the device session's own
// account where it has one ("cupti" or "events" on cuda, with the reason
// and the count of records dropped), "timers" for a backend that times ops
// with its own clock (the cpu backend), "" when timing is off.
func (s *Session) TimingSource() (source, why string, dropped uint64) {
	t := &s.time
	if t.timer == nil {
		return "", "timing is off", 0
	}
	if t.sourcer != nil {
		src, why, dropped := t.sourcer.TimingSource()
		return string(src), why, dropped
	}
	return "timers", "the backend times ops with its own clock", 0
}

// Spans returns when each op of the replays synchronised since the last
// call ran, if the session was opened WithTiming and its backend times
// replayed ops (the cpu backend does, from its own timers; the cuda backend
// under CUPTI, not by events); otherwise nil. Call it after Sync. The spans
// of several replays come together, each op once per replay: ReplaySpans
// tells them apart.
func (g *Graph) Spans() []Span {
	if g.closed.Load() || g.s.time.timer == nil {
		return nil
	}
	g.launched = g.launched[:0]
	var spans []Span
	_ = g.s.time.timer.Spans(func(op, stream int, start, end time.Duration) {
		spans = append(spans, Span{Op: op, Stream: stream, Start: start, End: end})
	})
	return spans
}

// launchRange is n launches of a graph in a row: the backend's replay
// numbers seq to seq+n-1, the graph's launches launch to launch+n-1.
type launchRange struct{ seq, launch, n int }

// noteLaunch counts a launch that Launch just made: its backend replay
// number is the session's count of launches so far.
func (g *Graph) noteLaunch() {
	seq := g.s.time.replays
	g.s.time.replays++
	if g.s.time.timer == nil {
		return
	}
	launch := g.stats.Launches
	if n := len(g.launched); n > 0 {
		if last := &g.launched[n-1]; last.seq+last.n == seq && last.launch+last.n == launch {
			last.n++
			return
		}
	}
	g.launched = append(g.launched, launchRange{seq: seq, launch: launch, n: 1})
}

// launchOf is the graph's launch number of the backend's replay seq, if
// it is one of g's launches since its spans were last read.
func launchOf(ranges []launchRange, seq int) (int, bool) {
	i, _ := slices.BinarySearchFunc(ranges, seq, func(r launchRange, seq int) int {
		switch {
		case r.seq+r.n <= seq:
			return -1
		case r.seq > seq:
			return 1
		}
		return 0
	})
	if i < len(ranges) && ranges[i].seq <= seq && seq < ranges[i].seq+ranges[i].n {
		return ranges[i].launch + seq - ranges[i].seq, true
	}
	return 0, false
}

// TimesReplays reports whether ReplaySpans times the replays launched
// back to back, each apart: the session was opened WithTiming on a backend
// that can (the cpu backend; cuda when it times by CUPTI, op by op or, with
// "cupti-graph", each replay whole). Where it cannot, a replay's ops have spans only if it ran
// alone (cuda timed by events: not even then), and a caller times the
// replay as a whole instead.
func (g *Graph) TimesReplays() bool {
	if g.unusable() || g.s.time.timer == nil {
		return false
	}
	rt, ok := g.s.time.timer.(device.ReplayTimer)
	return ok && rt.TimesReplays()
}

// ReplaySpans returns the op spans of each of g's replays synchronised
// since its spans were last read (by ReplaySpans or Spans), in launch
// order: launch them back to back, Sync once, then call it (after every
// Sync, so that the replays it returns share one clock). Each replay's
// Start is when its first op started, measured from the backend's clock at
// the first launch (or eager op) of the synchronised work, its End when
// its last op ended, and its spans are measured from its Start. A replay
// timed as a whole graph (WithTimingSource("cupti-graph")) has Whole set
// and no spans. Without timing, or on a backend that cannot tell replays
// apart (TimesReplays), it returns none; spans of ops of other graphs or
// of eager runs are dropped. The error is the backend's, reading its
// timers; what it could read is returned beside it.
//
// The spans of all the replays share one backing array, filled in one
// pass when the backend gives them replay by replay (cuda does) and with
// one counting sort otherwise.
func (g *Graph) ReplaySpans() ([]ReplaySpans, error) {
	if g.unusable() {
		return nil, errGraphClosed
	}
	if g.s.time.timer == nil {
		return nil, nil
	}
	ranges := g.launched
	g.launched = nil
	rt, ok := g.s.time.timer.(device.ReplayTimer)
	if !ok {
		return nil, g.s.time.timer.Spans(func(int, int, time.Duration, time.Duration) {})
	}
	first, total := 0, 0 // the launches read: first to first+total-1
	if len(ranges) > 0 {
		first = ranges[0].launch
		last := ranges[len(ranges)-1]
		total = last.launch + last.n - first
	}
	reps := make([]ReplaySpans, total)
	seen := make([]bool, total)
	spans := make([]Span, 0, g.spansHint)
	of := make([]int32, 0, g.spansHint) // by span: its replay's index in reps
	grouped := true
	err := rt.ReplaySpans(func(replay, op, stream int, start, end time.Duration) {
		if replay < 0 {
			return
		}
		launch, ok := launchOf(ranges, replay)
		if !ok || launch < first || launch >= first+total {
			return
		}
		i := launch - first
		r := &reps[i]
		if !seen[i] {
			seen[i] = true
			*r = ReplaySpans{Launch: launch, Start: start, End: end}
		}
		r.Start, r.End = min(r.Start, start), max(r.End, end)
		if op < 0 {
			r.Whole = true
			return
		}
		if n := len(of); n > 0 && of[n-1] > int32(i) {
			grouped = false
		}
		spans = append(spans, Span{Op: op, Stream: stream, Start: start, End: end})
		of = append(of, int32(i))
	})
	g.spansHint = len(spans)
	if !grouped {
		// A counting sort by replay, keeping each replay's spans in order.
		at := make([]int, total+1)
		for _, i := range of {
			at[i+1]++
		}
		for i := range total {
			at[i+1] += at[i]
		}
		sorted := make([]Span, len(spans))
		for k, i := range of {
			sorted[at[i]] = spans[k]
			at[i]++
		}
		slices.Sort(of)
		spans = sorted
	}
	out := reps[:0]
	for k := 0; k < total; k++ {
		if !seen[k] {
			continue
		}
		r := reps[k]
		lo, _ := slices.BinarySearch(of, int32(k))
		hi, _ := slices.BinarySearch(of, int32(k+1))
		r.Spans = spans[lo:hi:hi]
		for j := range r.Spans {
			r.Spans[j].Start -= r.Start
			r.Spans[j].End -= r.Start
		}
		if len(r.Spans) == 0 {
			r.Spans = nil
		}
		out = append(out, r)
	}
	return out, err
}
