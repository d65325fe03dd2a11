package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dagrun/dagrun/executor"
)

// --graph auto: the session runs the plan eagerly and, after a few
// identical runs, captures it (executor.WithAutoCapture) and replays its
// first replay itself; the runs after that are launched here in batches,
// as --graph always launches them, and traced the same way.

// replayRest replays the runs after the first done ones through g, the
// graph the session captured automatically, traced as rs asks; start is
// the start of the runs, the clock their traces are placed on.
func (c *cli) replayRest(ctx context.Context, g *executor.Graph, rs *runState, done, ops int, start time.Time) (*graphReport, error) {
	replayStart := time.Now()
	clock := newReplayClock(rs.repeat)
	var err error
	switch {
	case !rs.traceReplays:
		err = replayLoop(ctx, g, done, rs.repeat, rs.bar, clock)
	case g.TimesReplays():
		err = replayBatches(ctx, g, rs, start, clock, done)
	default:
		clock = nil
		err = replayAlone(ctx, g, rs, start, done)
	}
	if err != nil {
		return nil, err
	}
	return newGraphReport(g.Stats(), time.Since(replayStart), rs.repeat-done, ops, clock), nil
}

// noteAutoCapture puts what --graph auto did into the report: which runs
// were replays. A plan it could not capture says why on stderr with -v.
func (c *cli) noteAutoCapture(l executor.RunLog, verbose bool, r *runReport) {
	if l.CapturedAfter > 0 {
		r.Runs, r.CapturedAfter = l.String(), l.CapturedAfter
		return
	}
	if l.NotCaptured != nil && verbose {
		why := strings.ReplaceAll(l.NotCaptured.Error(), "\n", "; ")
		fmt.Fprintf(c.stderr, "dagrun run: --graph auto: the runs stay eager, the plan cannot be captured: %s\n", why)
	}
}
