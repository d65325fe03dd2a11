// Package progress draws a one-line bar on a terminal: the runs done of
// a long repeat, their rate and the time left, and within a long run the
// ops done, so that long work shows it is alive.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/internal/human"
)

// The bar's pace: nothing is drawn before Delay has passed, and then at
// most once an Interval.
const (
	Delay    = 500 * time.Millisecond // runs done sooner draw no bar
	Interval = 100 * time.Millisecond // at most 10 drawings a second
	barWidth = 24
)

// Bar is the bar of a number of runs. Where it has nowhere to draw it
// draws nothing, so that output stays clean. Its methods are safe from
// several goroutines (Ops is called from a watcher's).
type Bar struct {
	mu    sync.Mutex
	w     io.Writer // nil: draw nothing
	now   func() time.Time
	total int
	done  int // the runs done so far, drawn or not
	start time.Time
	next  time.Time // the earliest time to draw
	width int       // of the line on screen, 0 when none is
}

// New returns the bar of total runs drawn on w, a terminal, or nowhere
// when w is nil; now reads the clock (nil: time.Now).
func New(w io.Writer, total int, now func() time.Time) *Bar {
	if now == nil {
		now = time.Now
	}
	p := &Bar{now: now, total: total}
	if w != nil && total > 0 {
		p.w = w
		p.start = now()
		p.next = p.start.Add(Delay)
	}
	return p
}

// Drawn reports whether the bar draws anywhere.
func (p *Bar) Drawn() bool { return p.w != nil }

// due reports whether update would draw now.
func (p *Bar) due() bool {
	return p.w != nil && !p.now().Before(p.next)
}

// Update redraws the bar with done runs done, if it is due. A single run
// draws no bar of runs, only its ops (Ops).
func (p *Bar) Update(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = max(p.done, done)
	if p.total < 2 || !p.due() {
		return
	}
	now := p.now()
	p.next = now.Add(Interval)
	elapsed := now.Sub(p.start)
	line := p.bar(float64(done)) + fmt.Sprintf(" %d/%d runs", done, p.total)
	if done > 0 && elapsed > 0 {
		rate := float64(done) / elapsed.Seconds()
		left := time.Duration(float64(p.total-done) / rate * float64(time.Second))
		line += fmt.Sprintf(", %s/s, %s left", rateString(rate), human.Duration(left))
	}
	p.draw(line)
}

// Ops redraws the bar within run number run (from 1), done of its total
// ops done, if it is due.
func (p *Bar) Ops(run, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total == 0 || !p.due() {
		return
	}
	now := p.now()
	p.next = now.Add(Interval)
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
func (p *Bar) bar(runs float64) string {
	filled := min(int(barWidth*runs/float64(p.total)), barWidth)
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled) + "]"
}

// draw puts line in place of the one on screen.
func (p *Bar) draw(line string) {
	// Spaces, not an escape sequence, cover the rest of a longer line
	// before: every terminal understands them.
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// Clear removes the bar from the screen, if it is there.
func (p *Bar) Clear() {
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
