package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/profile"
)

const (
	progressDelay    = 500 * time.Millisecond // runs done sooner draw no bar
	progressInterval = 100 * time.Millisecond // at most 10 drawings a second
	progressBarWidth = 24
	// progressLines is how often a long run says where it is when stderr
	// is not a terminal (a log, a CI job): a line of its own each time.
	progressLines = 30 * time.Second
)

// progress draws a one-line bar of the runs done, their rate and the time
// left on a terminal, so that a long --repeat shows it is alive; within a
// long run, the ops done of the run (ops). Where stderr is no terminal, a
// run that lasts says the same in a line every progressLines, and a short
// one nothing, so that output stays clean.
type progress struct {
	mu    sync.Mutex // ops draws from a watcher's goroutine
	w     io.Writer  // nil: draw nothing
	lines bool       // w is no terminal: lines, not a bar
	now   func() time.Time
	total int
	done  int // the runs done so far, drawn or not
	start time.Time
	next  time.Time // the earliest time to draw
	width int       // of the line on screen, 0 when none is
	// finish is when the runs should end, estimated when they had got to
	// estimated runs.
	finish    time.Time
	estimated float64
}

// newProgress returns the progress of total runs, shown on stderr unless
// quiet is true: a bar on a terminal, lines elsewhere.
func (c *cli) newProgress(total int, quiet bool) *progress {
	now := c.now
	if now == nil {
		now = time.Now
	}
	p := &progress{now: now, total: total}
	if !quiet && total > 0 {
		p.w = c.stderr
		p.lines = !c.isTerminal(c.stderr)
		p.start = now()
		p.next = p.start.Add(p.interval(progressDelay))
	}
	return p
}

// interval is how long to wait before the next drawing: d on a terminal,
// progressLines elsewhere.
func (p *progress) interval(d time.Duration) time.Duration {
	if p.lines {
		return progressLines
	}
	return d
}

// isTerminal reports whether w is a terminal, as c's terminal check says
// (a test's stand-in) or else by whether it is a character device.
func (c *cli) isTerminal(w io.Writer) bool {
	if c.terminal != nil {
		return c.terminal(w)
	}
	return isCharDevice(w)
}

func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// due reports whether update would draw now.
func (p *progress) due() bool {
	return p.w != nil && !p.now().Before(p.next)
}

// update redraws the bar with done runs done, if it is due. A single run
// draws no bar of runs, only its ops (ops).
func (p *progress) update(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = max(p.done, done)
	if p.total < 2 || !p.due() {
		return
	}
	now := p.now()
	p.next = now.Add(p.interval(progressInterval))
	elapsed := now.Sub(p.start)
	text := fmt.Sprintf("%d/%d runs", done, p.total)
	if done > 0 && elapsed > 0 {
		text += fmt.Sprintf(", %s/s", rateString(float64(done)/elapsed.Seconds()))
	}
	p.draw(float64(done), text+p.left(now, float64(done)), elapsed)
}

// ops redraws the bar within run number run (from 1), done of its total
// ops done, if it is due; frac is the share of the run's work that those
// ops are, which the time left is estimated from.
func (p *progress) ops(run, done, total int, frac float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total == 0 || !p.due() {
		return
	}
	now := p.now()
	p.next = now.Add(p.interval(progressInterval))
	runs := float64(run-1) + frac
	text := ""
	if p.total > 1 {
		text = fmt.Sprintf("run %d/%d: ", run, p.total)
	}
	text += fmt.Sprintf("%d/%d ops", done, total)
	p.draw(runs, text+p.left(now, runs), now.Sub(p.start))
}

// left says the time left at now, with runs of the total done. It is
// estimated from the pace so far when the runs have moved on since the
// last estimate, and counted down from that estimate while they have not,
// so that it shrinks while one long op runs instead of growing with the
// time spent on it.
func (p *progress) left(now time.Time, runs float64) string {
	elapsed := now.Sub(p.start)
	if runs <= 0 || elapsed <= 0 {
		return ""
	}
	if runs > p.estimated {
		p.finish = now.Add(time.Duration(float64(elapsed) * (float64(p.total) - runs) / runs))
		p.estimated = runs
	}
	left := p.finish.Sub(now)
	if left <= 0 {
		return ", taking longer than estimated"
	}
	return fmt.Sprintf(", %s left", human.Duration(left))
}

// bar is the bar filled to runs of the total.
func (p *progress) bar(runs float64) string {
	filled := min(int(progressBarWidth*runs/float64(p.total)), progressBarWidth)
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", progressBarWidth-filled) + "]"
}

// draw puts the bar filled to runs and text in place of the line on
// screen, or where there is no terminal writes text in a line of its own.
func (p *progress) draw(runs float64, text string, elapsed time.Duration) {
	if p.lines {
		fmt.Fprintf(p.w, "dagrun run: progress: %s (%s so far)\n", text, human.Duration(elapsed))
		return
	}
	line := p.bar(runs) + " " + text
	// Spaces, not an escape sequence, cover the rest of a longer line
	// before: every terminal understands them.
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// clear removes the bar from the screen, if it is there.
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || p.width == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	p.width = 0
}

func rateString(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}

// opsProgress is what the runner calls during a long run: bar's ops with
// the share of the work done, the ops weighed by the CPU backend's
// estimate of each (the only backend that counts them) and taken as done
// in the order of g. A GEMM after a thousand small ops is most of the run,
// and the time left says so from the start instead of growing as the GEMM
// runs.
func (p *progress) opsProgress(g *dag.Graph) func(run, done, ops int) {
	share := workShares(profile.CPUOpTimes(g))
	return func(run, done, ops int) {
		p.ops(run, done, ops, share[max(0, min(done, len(share)-1))])
	}
}

// workShares is, for each count k of ops done, the share of the work that
// the first k are, ops weighed by times (every op at least a microsecond,
// so that a graph of ops the model calls free still moves).
func workShares(times []time.Duration) []float64 {
	share := make([]float64, len(times)+1)
	var sum float64
	for i, t := range times {
		sum += float64(max(t, time.Microsecond))
		share[i+1] = sum
	}
	for i := range share {
		share[i] /= max(sum, 1)
	}
	return share
}
