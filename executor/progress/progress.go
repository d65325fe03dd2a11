// Package progress shows how far an executor.Runner's runs have come: a
// one-line bar of the runs done, their rate and the time left on a
// terminal, or where there is no terminal (a log, a CI job) a line of its
// own now and then, so that a long run shows it is alive and a short one
// leaves its output clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
)

const (
	// Delay is how long runs go before the bar is first drawn: runs done
	// sooner draw none.
	Delay    = 500 * time.Millisecond
	interval = 100 * time.Millisecond // at most 10 drawings a second
	width    = 24
	// LineEvery is how often a run says where it is when its writer is
	// not a terminal: a line of its own each time.
	LineEvery = 30 * time.Second
)

// Bar draws the progress of a number of runs and, within a long run, of
// its ops. A Bar with no writer draws nothing. Its methods may be called
// from several goroutines (a Runner reports ops from a watcher's).
type Bar struct {
	mu     sync.Mutex
	w      io.Writer // nil: draw nothing
	prefix string    // lines, not a bar, each after prefix; "" on a terminal
	lines  bool
	now    func() time.Time
	total  int
	done   int // the runs done so far, drawn or not
	start  time.Time
	next   time.Time // the earliest time to draw
	width  int       // of the line on screen, 0 when none is
	// finish is when the runs should end, estimated when they had got to
	// estimated runs.
	finish    time.Time
	estimated float64
}

// Option configures a Bar.
type Option func(*Bar)

// Lines makes the Bar write a line of its own every LineEvery, each
// starting with prefix, instead of redrawing a bar: for a writer that is
// not a terminal.
func Lines(prefix string) Option { return func(b *Bar) { b.lines, b.prefix = true, prefix } }

// Clock makes the Bar read the time from now (time.Now by default).
func Clock(now func() time.Time) Option { return func(b *Bar) { b.now = now } }

// New returns the Bar of total runs, drawn on w; a nil w, or no runs,
// draws nothing.
func New(w io.Writer, total int, opts ...Option) *Bar {
	b := &Bar{now: time.Now, total: total}
	for _, o := range opts {
		o(b)
	}
	if w != nil && total > 0 {
		b.w = w
		b.start = b.now()
		b.next = b.start.Add(b.interval(Delay))
	}
	return b
}

// IsTerminal reports whether w is a terminal: an *os.File of a character
// device.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Drawing reports whether the Bar draws at all.
func (b *Bar) Drawing() bool { return b.w != nil }

// interval is how long to wait before the next drawing: d on a terminal,
// LineEvery elsewhere.
func (b *Bar) interval(d time.Duration) time.Duration {
	if b.lines {
		return LineEvery
	}
	return d
}

// due reports whether a drawing is due now.
func (b *Bar) due() bool {
	return b.w != nil && !b.now().Before(b.next)
}

// Runs redraws the bar with done runs done, if a drawing is due. A single
// run draws no bar of runs, only its ops (Ops).
func (b *Bar) Runs(done int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = max(b.done, done)
	if b.total < 2 || !b.due() {
		return
	}
	now := b.now()
	b.next = now.Add(b.interval(interval))
	elapsed := now.Sub(b.start)
	text := fmt.Sprintf("%d/%d runs", done, b.total)
	if done > 0 && elapsed > 0 {
		text += fmt.Sprintf(", %s/s", rate(float64(done)/elapsed.Seconds()))
	}
	b.draw(float64(done), text+b.left(now, float64(done)), elapsed)
}

// Ops redraws the bar within run number run (from 1), done of its total
// ops done, if a drawing is due; frac is the share of the run's work that
// those ops are, which the time left is estimated from.
func (b *Bar) Ops(run, done, total int, frac float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if total == 0 || !b.due() {
		return
	}
	now := b.now()
	b.next = now.Add(b.interval(interval))
	runs := float64(run-1) + frac
	text := ""
	if b.total > 1 {
		text = fmt.Sprintf("run %d/%d: ", run, b.total)
	}
	text += fmt.Sprintf("%d/%d ops", done, total)
	b.draw(runs, text+b.left(now, runs), now.Sub(b.start))
}

// left says the time left at now, with runs of the total done. It is
// estimated from the pace so far when the runs have moved on since the
// last estimate, and counted down from that estimate while they have not,
// so that it shrinks while one long op runs instead of growing with the
// time spent on it.
func (b *Bar) left(now time.Time, runs float64) string {
	elapsed := now.Sub(b.start)
	if runs <= 0 || elapsed <= 0 {
		return ""
	}
	if runs > b.estimated {
		b.finish = now.Add(time.Duration(float64(elapsed) * (float64(b.total) - runs) / runs))
		b.estimated = runs
	}
	left := b.finish.Sub(now)
	if left <= 0 {
		return ", taking longer than estimated"
	}
	return fmt.Sprintf(", %s left", human.Duration(left))
}

// draw puts the bar filled to runs and text in place of the line on
// screen, or where there is no terminal writes text in a line of its own.
func (b *Bar) draw(runs float64, text string, elapsed time.Duration) {
	if b.lines {
		fmt.Fprintf(b.w, "%s%s (%s so far)\n", b.prefix, text, human.Duration(elapsed))
		return
	}
	filled := min(int(width*runs/float64(b.total)), width)
	line := "[" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "] " + text
	// Spaces, not an escape sequence, cover the rest of a longer line
	// before: every terminal understands them.
	pad := max(b.width-len(line), 0)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	b.width = len(line)
}

// Clear removes the bar from the screen, if it is there.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil || b.width == 0 {
		return
	}
	fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", b.width))
	b.width = 0
}

func rate(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}

// Options are the Runner's options that report to the Bar: the runs done
// and, where it draws, the ops done within a run, weighed by times (each
// op's estimated time, by op ID; profile.CPUOpTimes on the CPU backend,
// the only one that counts ops) and taken as done in ID order. A GEMM
// after a thousand small ops is most of the run, and the time left says
// so from the start instead of growing as the GEMM runs.
func (b *Bar) Options(times []time.Duration) []executor.Option {
	opts := []executor.Option{executor.WithProgress(b.Runs)}
	if b.w == nil {
		return opts
	}
	share := shares(times)
	return append(opts, executor.WithOpsProgress(func(run, done, ops int) {
		b.Ops(run, done, ops, share[max(0, min(done, len(share)-1))])
	}))
}

// shares is, for each count k of ops done, the share of the work that the
// first k are, ops weighed by times (every op at least a microsecond, so
// that a graph of ops the model calls free still moves).
func shares(times []time.Duration) []float64 {
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
