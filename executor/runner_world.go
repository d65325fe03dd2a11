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
func (r *Runner) runRanks(ctx context.Context, n int, rep *Report) error {
	defer func() { rep.Wall = time.Since(rep.Start) }()
	for range n {
		run, eager := r.runRank, r.replay == nil
		if !eager {
			run = r.replay
		}
		runStart := time.Since(rep.Start)
		if err := run(ctx); err != nil {
			return err
		}
		if err := r.done(rep, runStart, time.Since(rep.Start)-runStart, r.sessions, eager); err != nil {
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
		r.replay, r.closeG = g.Run, g.Close
		return nil
	}
	g, err := r.rank.Capture(ctx)
	if err != nil {
		return err
	}
	r.replay = func(ctx context.Context) error { return r.rank.Replay(ctx, g) }
	return nil
}
