package main

import (
	"context"
	"fmt"
	"github.com/dagrun/dagrun/internal/human"
	"io"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/trace"
)

// Tracing graph replays (--graph with --trace): the replays --trace-runs
// chooses keep their op spans. Where the backend times the ops of replays
// launched back to back (the cpu backend; cuda under CUPTI), traced
// replays are launched in batches like untraced ones and synchronised
// only at a batch's end, where one read of the backend's timers gives
// each replay's spans; nothing waits on the tracing between launches.
// Where it cannot (a CUDA graph timed by events), each traced replay is
// launched alone and waited for, and its wall time is its trace.
//
// With --trace-detail replays the traced replays are kept whole, not op by
// op: on cuda each replay is timed by CUPTI's graph-level record of its
// launch, on the device's clock, which costs the device nearly nothing
// (the "cupti-graph" timing source); a backend that times ops, not whole
// replays (the cpu backend), gives each replay from its first op's start to
// its last op's end. Whole replays go to the trace's figures (replays,
// replay_timing) and the summary, not to its slices.

// How whole replays were timed, for the trace's replay_timing and the
// summary.
const (
	wholeOnDevice = "each replay whole on the device's clock, from CUPTI's graph-launch record (its first work's start to its last work's end), launched back to back"
	wholeFromOps  = "each replay whole on the backend's clock, from its first op's start to its last op's end, launched back to back"
	wholeOnHost   = "their ops are not timed one by one on this backend; each launched alone; launch to synchronised, host clock"
)

// keepReplay keeps traced replay rep, which started at start on the host's
// clock of the runs: op by op, or whole where the backend timed it whole
// or --trace-detail replays asked for it.
func (rs *runState) keepReplay(start time.Duration, rep executor.ReplaySpans) {
	switch {
	case rep.Whole:
		rs.whole = append(rs.whole, trace.WholeReplay{Run: rep.Launch, Start: start, Dur: rep.End - rep.Start})
		rs.wholeTiming = wholeOnDevice
	case rs.wholeReplays:
		rs.whole = append(rs.whole, trace.WholeReplay{Run: rep.Launch, Start: start, Dur: rep.End - rep.Start})
		rs.wholeTiming = wholeFromOps
	default:
		rs.runs = append(rs.runs, trace.RunSpans{Run: rep.Launch, Start: start, Spans: rep.Spans})
	}
}

// replayTraced is replay with the replays rs.traced chooses traced into
// rs.runs (op spans) or rs.whole (whole replays).
func replayTraced(ctx context.Context, sess *executor.Session, rs *runState, ops int) (r *graphReport, err error) {
	g, err := sess.Capture(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := g.Close(); err == nil {
			err = cerr
		}
	}()
	g.Spans() // what the capture left
	start := time.Now()
	var clock *replayClock // nil: replays launched alone are timed by the wall
	if g.TimesReplays() {
		clock = newReplayClock(rs.repeat)
		err = replayBatches(ctx, g, rs, start, clock, 0)
	} else {
		err = replayAlone(ctx, g, rs, start, 0)
	}
	if err != nil {
		return nil, err
	}
	return newGraphReport(g.Stats(), time.Since(start), rs.repeat, ops, clock), nil
}

// replayBatches launches the replays of runs done+1 to rs.repeat in
// batches, as replay does (timed by clock), and after each batch's Sync keeps the spans of the traced replays in it. The
// replays' spans are measured from the backend's clock at the batch's
// first launch, which the host's clock just before that launch stands for:
// each traced replay starts there plus its first op's start. A traced
// replay whose spans did not come (records CUPTI dropped: the timing note
// counts them) is left out of the trace.
func replayBatches(ctx context.Context, g *executor.Graph, rs *runState, start time.Time, clock *replayClock, done int) error {
	// The graph's launch k is run k+offset: its launches before these
	// were runs too (--graph auto's first replay).
	offset, from := done-g.Stats().Launches, done
	batch := 1 // until a replay has been timed
	for done < rs.repeat {
		n := min(batch, rs.repeat-done)
		batchStart := time.Since(start)
		for range n {
			if err := g.Launch(ctx); err != nil {
				return err
			}
		}
		if err := g.Sync(ctx); err != nil {
			return err
		}
		clock.add(time.Since(start)-batchStart, n, done)
		// The spans of every replay of the batch are read, the untraced
		// ones dropped. A backend that fails reading its timers loses the
		// spans, not the run, as Session.Spans does for eager runs.
		reps, _ := g.ReplaySpans()
		for _, rep := range reps {
			rep.Launch += offset
			if rs.traced(rep.Launch) {
				rs.keepReplay(batchStart+rep.Start, rep)
			}
		}
		done += n
		rs.bar.update(done)
		batch = syncEvery
		if each := time.Since(start) / time.Duration(done-from); each > 0 {
			batch = int(min(max(syncWindow/each, 1), syncEvery))
		}
	}
	return nil
}

// replayAlone launches each traced replay of runs done+1 to rs.repeat
// alone and waits for it, so that its spans (or, without them, its wall
// time) are its own; the others are launched in batches.
func replayAlone(ctx context.Context, g *executor.Graph, rs *runState, start time.Time, done int) error {
	pending := 0
	sync := func() error {
		if pending == 0 {
			return nil
		}
		err := g.Sync(ctx)
		pending = 0
		g.Spans() // untraced replays' spans are dropped
		return err
	}
	for run := done + 1; run <= rs.repeat; run++ {
		if !rs.traced(run) {
			if err := g.Launch(ctx); err != nil {
				return err
			}
			if pending++; pending == syncEvery {
				if err := sync(); err != nil {
					return err
				}
			}
			rs.bar.update(run)
			continue
		}
		if err := sync(); err != nil {
			return err
		}
		runStart := time.Since(start)
		if err := g.Run(ctx); err != nil {
			return err
		}
		wall := time.Since(start) - runStart
		if spans := g.Spans(); len(spans) > 0 {
			rep := executor.ReplaySpans{Launch: run, Spans: spans}
			rep.Start, rep.End = spans[0].Start, spans[0].End
			for _, sp := range spans {
				rep.Start, rep.End = min(rep.Start, sp.Start), max(rep.End, sp.End)
			}
			rs.keepReplay(runStart, rep)
		} else {
			rs.whole = append(rs.whole, trace.WholeReplay{Run: run, Start: runStart, Dur: wall})
			rs.wholeTiming = wholeOnHost
		}
		rs.bar.update(run)
	}
	return sync()
}

// briefReplays is how many replays traced whole the brief summary lists.
const briefReplays = 5

// writeWholeReplays adds the replays traced as whole graphs to the trace
// summary, saying how they were timed: the first few, or with all every
// one.
func writeWholeReplays(w io.Writer, whole []trace.WholeReplay, timing string, all bool) {
	if len(whole) == 0 {
		return
	}
	fmt.Fprintf(w, "replays traced as whole graphs (%s):\n", timing)
	shown := whole
	if !all && len(shown) > briefReplays {
		shown = shown[:briefReplays]
	}
	for _, r := range shown {
		fmt.Fprintf(w, "  replay %d: %s\n", r.Run, human.Duration(r.Dur))
	}
	if n := len(whole) - len(shown); n > 0 {
		fmt.Fprintf(w, "  and %d more (-v lists every one; the trace holds them)\n", n)
	}
}
