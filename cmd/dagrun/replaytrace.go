package main

import (
	"context"
	"fmt"
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

// wholeReplay is a traced replay timed as a whole: launch to the end of
// its Sync, on the host's clock.
type wholeReplay struct {
	Run  int
	Wall time.Duration
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
	if g.TimesReplays() {
		err = replayBatches(ctx, g, rs, start)
	} else {
		err = replayAlone(ctx, g, rs, start)
	}
	if err != nil {
		return nil, err
	}
	wall := time.Since(start)
	st := g.Stats()
	r = &graphReport{
		CaptureNS:     st.Capture.Nanoseconds(),
		InstantiateNS: st.Instantiate.Nanoseconds(),
		Replays:       st.Launches,
		ReplayNS:      wall.Nanoseconds(),
		PerReplayNS:   wall.Nanoseconds() / int64(rs.repeat),
	}
	if ops > 0 {
		r.PerOpNS = r.PerReplayNS / int64(ops)
	}
	return r, nil
}

// replayBatches launches every replay in batches, as replay does, and
// after each batch's Sync keeps the spans of the traced replays in it. The
// replays' spans are measured from the backend's clock at the batch's
// first launch, which the host's clock just before that launch stands for:
// each traced replay starts there plus its first op's start. A traced
// replay whose spans did not come (records CUPTI dropped: the timing note
// counts them) is left out of the trace.
func replayBatches(ctx context.Context, g *executor.Graph, rs *runState, start time.Time) error {
	batch := 1 // until a replay has been timed
	for done := 0; done < rs.repeat; {
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
		// The spans of every replay of the batch are read, the untraced
		// ones dropped. A backend that fails reading its timers loses the
		// spans, not the run, as Session.Spans does for eager runs.
		reps, _ := g.ReplaySpans()
		for _, rep := range reps {
			if rs.traced(rep.Launch) {
				rs.runs = append(rs.runs, trace.RunSpans{Run: rep.Launch, Start: batchStart + rep.Start, Spans: rep.Spans})
			}
		}
		done += n
		rs.bar.update(done)
		batch = syncEvery
		if each := time.Since(start) / time.Duration(done); each > 0 {
			batch = int(min(max(syncWindow/each, 1), syncEvery))
		}
	}
	return nil
}

// replayAlone launches each traced replay alone and waits for it, so that
// its spans (or, without them, its wall time) are its own; the others are
// launched in batches.
func replayAlone(ctx context.Context, g *executor.Graph, rs *runState, start time.Time) error {
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
	for run := 1; run <= rs.repeat; run++ {
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
			rs.runs = append(rs.runs, trace.RunSpans{Run: run, Start: runStart, Spans: spans})
		} else {
			rs.whole = append(rs.whole, wholeReplay{Run: run, Wall: wall})
		}
		rs.bar.update(run)
	}
	return sync()
}

// writeWholeReplays adds the replays traced as whole graphs to the trace
// summary: the backend could not time their ops one by one.
func writeWholeReplays(w io.Writer, whole []wholeReplay) {
	if len(whole) == 0 {
		return
	}
	fmt.Fprintf(w, "replays traced as whole graphs (their ops are not timed one by one on this backend; each launched alone; launch to synchronised, host clock):\n")
	for _, r := range whole {
		fmt.Fprintf(w, "  replay %d: %v\n", r.Run, r.Wall)
	}
}
