package executor

import (
	"context"
	"time"
)

// runRanks runs the ranks n times, each run every rank in this process at
// once. Under GraphAlways the Runner's first run is eager and the others
// replay a graph captured after it: NCCL connects the ranks at their first
// collectives, which a graph cannot hold. Replays are run one at a time,
// each a run of the world that a failing rank ends for all.
//
// The replays are timed apart from the eager run and the capture
// (Report.Replays), as a program that captures a world and replays it
// times it: the first run pays for NCCL's connections and every library's
// first call, which a figure per run would spread over the replays.
func (r *Runner) runRanks(ctx context.Context, n int, rep *Report) error {
	defer func() { rep.Wall = time.Since(rep.Start) }()
	var rt rankReplays
	if r.cfg.graph == GraphAlways {
		replays := n
		if r.replay == nil {
			replays-- // the first run is eager
		}
		rt.clock = newReplayClock(replays)
		defer func() { rep.Replays = rt.report(r.graphs) }()
	}
	for range n {
		run, eager := r.runRank, r.replay == nil
		if !eager {
			run = r.replay
		}
		runStart := time.Since(rep.Start)
		if err := run(ctx); err != nil {
			return err
		}
		wall := time.Since(rep.Start) - runStart
		if !eager {
			rt.add(runStart, wall)
		}
		if err := r.done(rep, runStart, wall, r.sessions, eager); err != nil {
			return err
		}
		if r.cfg.graph == GraphAlways && r.replay == nil {
			if err := r.captureRanks(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// rankReplays times the replays of a world's graphs, each launched and
// waited for alone: from the first's start to the last's end, and each
// by clock.
type rankReplays struct {
	clock      *replayClock
	n          int
	start, end time.Duration // on the runs' clock
}

// add counts a replay that started at start and took wall.
func (t *rankReplays) add(start, wall time.Duration) {
	if t.n == 0 {
		t.start = start
	}
	t.clock.add(wall, 1, t.n)
	t.n++
	t.end = start + wall
}

// report is the figures of the replays of graphs, each rank's graph in
// this process: the slowest rank's capture and instantiation, which the
// others waited for; nil when none was replayed.
func (t *rankReplays) report(graphs []*Graph) *ReplayReport {
	if t.n == 0 || len(graphs) == 0 {
		return nil
	}
	rr := &ReplayReport{Replays: graphs[0].Stats().Launches, Wall: t.end - t.start,
		PerReplay: t.clock.perReplay(), FirstReplay: t.clock.first}
	for _, g := range graphs {
		st := g.Stats()
		rr.Capture, rr.Instantiate = max(rr.Capture, st.Capture), max(rr.Instantiate, st.Instantiate)
	}
	return rr
}

// runRank runs the world, or this process's rank of it, once eagerly.
func (r *Runner) runRank(ctx context.Context) error {
	if r.world != nil {
		return r.world.Run(ctx)
	}
	return r.rank.Run(ctx)
}

// captureRanks captures every rank's plan and makes the replays the runs
// from now on.
func (r *Runner) captureRanks(ctx context.Context) error {
	if r.world != nil {
		g, err := r.world.Capture(ctx)
		if err != nil {
			return err
		}
		r.replay, r.closeG, r.graphs = g.Run, g.Close, g.graphs
		return nil
	}
	g, err := r.rank.Capture(ctx)
	if err != nil {
		return err
	}
	r.replay = func(ctx context.Context) error { return r.rank.Replay(ctx, g) }
	r.graphs = []*Graph{g}
	return nil
}
