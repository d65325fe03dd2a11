package main

import (
	"fmt"
	"github.com/dagrun/dagrun/internal/human"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

const (
	progressDelay    = 500 * time.Millisecond // runs done sooner draw no bar
	progressInterval = 100 * time.Millisecond // at most 10 drawings a second
	progressBarWidth = 24
)

// progress draws a one-line bar of the runs done, their rate and the time
// left on a terminal, so that a long --repeat shows it is alive; within a
// long run, the ops done of the run (ops). Where there is no terminal it
// draws nothing, so that output stays clean.
type progress struct {
	mu    sync.Mutex // ops draws from a watcher's goroutine
	w     io.Writer  // nil: draw nothing
	now   func() time.Time
	total int
	done  int // the runs done so far, drawn or not
	start time.Time
	next  time.Time // the earliest time to draw
	width int       // of the line on screen, 0 when none is
}

// newProgress returns the bar of total runs, drawn on stderr only when it
// is a terminal and quiet is false.
func (c *cli) newProgress(total int, quiet bool) *progress {
	now := c.now
	if now == nil {
		now = time.Now
	}
	p := &progress{now: now, total: total}
	if !quiet && total > 0 && c.isTerminal(c.stderr) {
		p.w = c.stderr
		p.start = now()
		p.next = p.start.Add(progressDelay)
	}
	return p
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
	p.next = now.Add(progressInterval)
	elapsed := now.Sub(p.start)
	line := p.bar(float64(done)) + fmt.Sprintf(" %d/%d runs", done, p.total)
	if done > 0 && elapsed > 0 {
		rate := float64(done) / elapsed.Seconds()
		left := time.Duration(float64(p.total-done) / rate * float64(time.Second))
		line += fmt.Sprintf(", %s/s, %s left", rateString(rate), human.Duration(left))
	}
	p.draw(line)
}

// ops redraws the bar within run number run (from 1), done of its total
// ops done, if it is due.
func (p *progress) ops(run, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total == 0 || !p.due() {
		return
	}
	now := p.now()
	p.next = now.Add(progressInterval)
	runs := float64(run-1) + float64(done)/float64(total)
	line := p.bar(runs)
	if p.total > 1 {
		line += fmt.Sprintf(" run %d/%d:", run, p.total)
	}
	line += fmt.Sprintf(" %d/%d ops", done, total)
	if elapsed := now.Sub(p.start); runs > 0 && elapsed > 0 {
		left := time.Duration(float64(elapsed) * (float64(p.total) - runs) / runs)
		line += fmt.Sprintf(", %s left", human.Duration(left))
	}
	p.draw(line)
}

// bar is the bar filled to runs of the total.
func (p *progress) bar(runs float64) string {
	filled := min(int(progressBarWidth*runs/float64(p.total)), progressBarWidth)
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", progressBarWidth-filled) + "]"
}

// draw puts line in place of the one on screen.
func (p *progress) draw(line string) {
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
