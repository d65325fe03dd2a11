package executor

import (
	"context"
	"time"
)

// Replays launched by a Runner: in batches, then waited for. Where the
// backend times the ops of replays launched back to back (the cpu backend;
// cuda under CUPTI), traced replays are launched in batches like the
// others, and one read of the backend's timers after a batch's Sync gives
// each replay's spans. Where it cannot (a CUDA graph timed by events),
// each traced replay is launched alone and waited for, and its wall time
// is its trace.

// How whole replays were timed (Report.WholeTiming).
const (
	WholeOnDevice = "each replay whole on the device's clock, from CUPTI's graph-launch record (its first work's start to its last work's end), launched back to back"
	WholeFromOps  = "each replay whole on the backend's clock, from its first op's start to its last op's end, launched back to back"
	WholeOnHost   = "their ops are not timed one by one on this backend; each launched alone; launch to synchronised, host clock"
)

// ReplayReport is the figures of the replays of a graph.
type ReplayReport struct {
	Capture     time.Duration // submitting the plan into the capture
	Instantiate time.Duration // making the capture launchable
	Replays     int           // the graph's launches
	Wall        time.Duration // the replays of this Run, from the first launch to the last one's end
	// PerReplay is the time of a replay launched back to back with others,
	// after the warm-up (the first half of the replays, as for eager runs)
	// or, with too few replays, after the first; FirstReplay is the
	// first's, launched and synchronised alone (0 when not timed apart).
	PerReplay   time.Duration
	FirstReplay time.Duration
}

// replayAll captures the session's plan, replays it n times, and closes it
// when the Runner closes.
func (r *Runner) replayAll(ctx context.Context, n int, rep *Report) error {
	if r.graph == nil {
		g, err := r.sessions[0].Capture(ctx)
		if err != nil {
			return err
		}
		r.graph, r.closeG = g, g.Close
		g.Spans() // what the capture left
	}
	return r.replayRest(ctx, r.graph, rep, 0)
}

// replayRest replays the runs after the first done of rep through g.
func (r *Runner) replayRest(ctx context.Context, g *Graph, rep *Report, done int) error {
	start := time.Now()
	clock := newReplayClock(rep.Repeat)
	var err error
	if r.cfg.traced != nil && !g.TimesReplays() {
		clock = nil
		err = r.replayAlone(ctx, g, rep, done)
	} else {
		err = r.replayBatches(ctx, g, rep, clock, done)
	}
	st := g.Stats()
	wall := time.Since(start)
	rr := &ReplayReport{Capture: st.Capture, Instantiate: st.Instantiate, Replays: st.Launches, Wall: wall,
		PerReplay: wall / time.Duration(max(rep.Repeat-done, 1))}
	if clock != nil && clock.perReplay() > 0 {
		rr.PerReplay, rr.FirstReplay = clock.perReplay(), clock.first
	}
	rep.Replays = rr
	if r.cfg.graph == GraphAlways {
		rep.Wall = wall
	}
	return err
}

// replayBatches launches the replays of runs done+1 to rep.Repeat in
// batches, timed by clock, and after each batch's Sync keeps the spans of
// the traced replays in it. The replays' spans are measured from the
// backend's clock at the batch's first launch, which the host's clock just
// before that launch stands for: each traced replay starts there plus its
// first op's start. A traced replay whose spans did not come (records
// CUPTI dropped) is left out.
func (r *Runner) replayBatches(ctx context.Context, g *Graph, rep *Report, clock *replayClock, done int) error {
	// The graph's launch k is run k+offset: its launches before these
	// were runs too (GraphAuto's first replay).
	offset, from, start := r.runs-g.Stats().Launches, done, time.Now()
	batch := 1 // until a replay has been timed
	for done < rep.Repeat {
		n := min(batch, rep.Repeat-done)
		batchStart := time.Since(rep.Start)
		for range n {
			if err := g.Launch(ctx); err != nil {
				return err
			}
		}
		if err := g.Sync(ctx); err != nil {
			return err
		}
		clock.add(time.Since(rep.Start)-batchStart, n, done)
		if r.cfg.traced != nil {
			// A backend that fails reading its timers loses the spans, not
			// the run, as Session.Spans does for eager runs.
			reps, _ := g.ReplaySpans()
			for _, rs := range reps {
				rs.Launch += offset
				if r.cfg.traced(rs.Launch) {
					r.keepReplay(rep, batchStart+rs.Start, rs)
				}
			}
		}
		done += n
		r.runs += n
		rep.Runs += n
		r.progress(r.runs)
		batch = r.cfg.batch
		if each := time.Since(start) / time.Duration(done-from); each > 0 {
			batch = int(min(max(r.cfg.window/each, 1), time.Duration(r.cfg.batch)))
		}
	}
	return nil
}

// replayAlone launches each traced replay of runs done+1 to rep.Repeat
// alone and waits for it, so that its spans (or, without them, its wall
// time) are its own; the others are launched in batches.
func (r *Runner) replayAlone(ctx context.Context, g *Graph, rep *Report, done int) error {
	pending := 0
	sync := func() error {
		if pending == 0 {
			return nil
		}
		err := g.Sync(ctx)
		if err == nil {
			r.runs += pending
			rep.Runs += pending
		}
		pending = 0
		g.Spans() // untraced replays' spans are dropped
		return err
	}
	for range rep.Repeat - done {
		run := r.runs + pending + 1
		if !r.cfg.traced(run) {
			if err := g.Launch(ctx); err != nil {
				return err
			}
			if pending++; pending == r.cfg.batch {
				if err := sync(); err != nil {
					return err
				}
			}
			r.progress(run)
			continue
		}
		if err := sync(); err != nil {
			return err
		}
		runStart := time.Since(rep.Start)
		if err := g.Run(ctx); err != nil {
			return err
		}
		wall := time.Since(rep.Start) - runStart
		r.runs++
		rep.Runs++
		if spans := g.Spans(); len(spans) > 0 {
			rs := ReplaySpans{Launch: run, Spans: spans}
			rs.Start, rs.End = spans[0].Start, spans[0].End
			for _, sp := range spans {
				rs.Start, rs.End = min(rs.Start, sp.Start), max(rs.End, sp.End)
			}
			r.keepReplay(rep, runStart, rs)
		} else {
			rep.Whole = append(rep.Whole, WholeReplay{Run: run, Start: runStart, Dur: wall})
			rep.WholeTiming = WholeOnHost
		}
		r.progress(run)
	}
	return sync()
}

// keepReplay keeps traced replay rs, which started at start on the runs'
// clock: op by op, or whole where the backend timed it whole or
// WithWholeReplays asked for it.
func (r *Runner) keepReplay(rep *Report, start time.Duration, rs ReplaySpans) {
	switch {
	case rs.Whole:
		rep.Whole = append(rep.Whole, WholeReplay{Run: rs.Launch, Start: start, Dur: rs.End - rs.Start})
		rep.WholeTiming = WholeOnDevice
	case r.cfg.wholeReplays:
		rep.Whole = append(rep.Whole, WholeReplay{Run: rs.Launch, Start: start, Dur: rs.End - rs.Start})
		rep.WholeTiming = WholeFromOps
	default:
		rep.Traced[0] = append(rep.Traced[0], RunSpans{Run: rs.Launch, Start: start, Spans: rs.Spans})
	}
}

// replayClock times replays launched in batches. The first batch (one
// replay: the graph's upload, and the warm-up of what it touches) is kept
// apart, and the batches that start in the first half of the replays warm
// up (as eager runs do); the others count from each batch's first launch
// to its Sync's return, so that what the host does between batches
// (reading traced replays' spans, progress) is not charged to the
// replays.
type replayClock struct {
	warm            int // replays that warm up
	first, steady   time.Duration
	firstN, steadyN int
	// all and allN are every batch after the first, for too few replays
	// to leave any after the warm-up.
	all  time.Duration
	allN int
}

// newReplayClock is the clock of repeat replays: the first half warm up
// (at least the first of several), as a perf model's runs do.
func newReplayClock(repeat int) *replayClock {
	warm := 0
	if repeat > 1 {
		warm = max(1, repeat/2)
	}
	return &replayClock{warm: warm}
}

// add counts a batch of n replays, the first after done others, that took
// d.
func (c *replayClock) add(d time.Duration, n, done int) {
	switch {
	case c == nil:
		return
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
