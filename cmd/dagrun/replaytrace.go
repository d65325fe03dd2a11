package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/trace"
)

// Tracing graph replays (--graph with --trace): each replay --trace-runs
// chooses is launched alone and waited for, so that its spans (the cpu
// backend times a replay's ops) or, where the backend cannot time a
// replay's ops (a CUDA graph timed by events), its wall time are its own.
// The others are launched in batches, as untraced replays are.

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
				return nil, err
			}
			if pending++; pending == syncEvery {
				if err := sync(); err != nil {
					return nil, err
				}
			}
			rs.bar.update(run)
			continue
		}
		if err := sync(); err != nil {
			return nil, err
		}
		runStart := time.Since(start)
		if err := g.Run(ctx); err != nil {
			return nil, err
		}
		wall := time.Since(start) - runStart
		if spans := g.Spans(); len(spans) > 0 {
			rs.runs = append(rs.runs, trace.RunSpans{Run: run, Start: runStart, Spans: spans})
		} else {
			rs.whole = append(rs.whole, wholeReplay{Run: run, Wall: wall})
		}
		rs.bar.update(run)
	}
	if err := sync(); err != nil {
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

// writeWholeReplays adds the replays traced as whole graphs to the trace
// summary: the backend could not time their ops one by one.
func writeWholeReplays(w io.Writer, whole []wholeReplay) {
	if len(whole) == 0 {
		return
	}
	fmt.Fprintf(w, "replays traced as whole graphs (their ops are not timed one by one on this backend; launch to synchronised, host clock):\n")
	for _, r := range whole {
		fmt.Fprintf(w, "  replay %d: %v\n", r.Run, r.Wall)
	}
}
