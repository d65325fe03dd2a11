package progress_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dagrun/dagrun/internal/progress"
)

// fakeClock moves on by step at each reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	c.t = c.t.Add(c.step)
	return c.t
}

func TestBar(t *testing.T) {
	var stderr bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0)}
	p := progress.New(&stderr, 100, clock.now)

	clock.step = 100 * time.Millisecond
	p.Update(1)
	if stderr.Len() != 0 {
		t.Fatalf("drew %q before %s had passed", stderr.String(), progress.Delay)
	}
	clock.step = progress.Delay
	p.Update(25)
	first := stderr.String()
	if !strings.HasPrefix(first, "\r[") || !strings.Contains(first, "] 25/100 runs, ") || !strings.HasSuffix(first, " left") {
		t.Fatalf("bar = %q, want \"\\r[...] 25/100 runs, RATE/s, ETA left\"", first)
	}
	clock.step = 10 * time.Millisecond
	p.Update(26)
	if stderr.String() != first {
		t.Fatalf("drew again %s after the last drawing: %q", clock.step, stderr.String())
	}
	clock.step = 200 * time.Millisecond
	p.Update(100)
	if !strings.Contains(stderr.String()[len(first):], "] 100/100 runs") {
		t.Fatalf("second drawing = %q", stderr.String()[len(first):])
	}
	p.Clear()
	out := stderr.String()
	last := out[strings.LastIndex(out[:len(out)-1], "\r"):]
	if strings.Trim(last, "\r ") != "" || len(last) < len(first) {
		t.Fatalf("output ends with %q, want the bar cleared by \\r, spaces, \\r", last)
	}
	p.Clear()
	if stderr.String() != out {
		t.Errorf("clearing twice wrote %q", stderr.String()[len(out):])
	}
}

// A bar with nowhere to draw draws nothing.
func TestBarNowhere(t *testing.T) {
	p := progress.New(nil, 10, nil)
	if p.Drawn() {
		t.Fatal("a bar without a writer says it draws")
	}
	for i := range 10 {
		p.Update(i + 1)
		p.Ops(i+1, 1, 2)
	}
	p.Clear()
}

// Within a run the bar shows the ops done; a single run draws no bar of
// runs.
func TestBarOps(t *testing.T) {
	var stderr bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0), step: progress.Delay}
	p := progress.New(&stderr, 1, clock.now)
	p.Update(1)
	if stderr.Len() != 0 {
		t.Fatalf("one run drew %q", stderr.String())
	}
	p.Ops(1, 5, 10)
	if got := stderr.String(); !strings.HasPrefix(got, "\r[============            ] 5/10 ops, ") || !strings.HasSuffix(got, " left") {
		t.Fatalf("bar = %q, want half full at 5/10 ops with the time left", got)
	}
	stderr.Reset()
	p = progress.New(&stderr, 4, clock.now)
	p.Ops(2, 1, 4)
	if got := stderr.String(); !strings.Contains(got, "] run 2/4: 1/4 ops, ") {
		t.Fatalf("bar = %q, want run 2/4: 1/4 ops", got)
	}
}
