package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// manualClock reads the time it was set to.
type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time { return c.t }

func (c *manualClock) at(d time.Duration) { c.t = time.Unix(0, 0).Add(d) }

func TestBar(t *testing.T) {
	var w bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0)}
	b := New(&w, 100, Clock(clock.now))

	clock.step = 100 * time.Millisecond
	b.Runs(1)
	require.Zero(t, w.Len(), "drew before %s had passed", Delay)
	clock.step = Delay
	b.Runs(25)
	first := w.String()
	assert.True(t, strings.HasPrefix(first, "\r[") && strings.Contains(first, "] 25/100 runs, ") && strings.HasSuffix(first, " left"),
		"bar = %q, want \"\\r[...] 25/100 runs, RATE/s, ETA left\"", first)
	clock.step = 10 * time.Millisecond
	b.Runs(26)
	require.Equal(t, first, w.String(), "drew again %s after the last drawing", clock.step)
	clock.step = 200 * time.Millisecond
	b.Runs(100)
	assert.Contains(t, w.String()[len(first):], "] 100/100 runs")
	b.Clear()
	out := w.String()
	last := out[strings.LastIndex(out[:len(out)-1], "\r"):]
	assert.True(t, strings.Trim(last, "\r ") == "" && len(last) >= len(first), "output ends with %q, want the bar cleared by \\r, spaces, \\r", last)
	b.Clear()
	assert.Equal(t, out, w.String(), "clearing twice wrote more")
}

// A Bar with no writer draws nothing, and reports no ops to the Runner.
func TestBarNowhere(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0), step: time.Second}
	b := New(nil, 10, Clock(clock.now))
	for i := range 10 {
		b.Runs(i + 1)
	}
	b.Ops(1, 1, 2, 0.5)
	b.Clear()
	assert.False(t, b.Drawing())
	assert.Len(t, b.Options(nil), 1)
	assert.Len(t, New(&bytes.Buffer{}, 10).Options(nil), 2)
}

// Where the writer is no terminal, a short run writes nothing.
func TestLinesShortRun(t *testing.T) {
	var w bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0), step: time.Second}
	b := New(&w, 10, Clock(clock.now), Lines("p: "))
	for i := range 10 {
		b.Runs(i + 1)
	}
	b.Clear()
	assert.Empty(t, w.String())
}

// Within a run the bar shows the ops done; a single run draws no bar of
// runs.
func TestOps(t *testing.T) {
	var w bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0), step: Delay}
	b := New(&w, 1, Clock(clock.now))
	b.Runs(1)
	require.Zero(t, w.Len(), "one run drew %q", w.String())
	b.Ops(1, 5, 10, 0.5)
	got := w.String()
	assert.True(t, strings.HasPrefix(got, "\r[============            ] 5/10 ops, ") && strings.HasSuffix(got, " left"),
		"bar = %q, want half full at 5/10 ops with the time left", got)
	w.Reset()
	b = New(&w, 4, Clock(clock.now))
	b.Ops(2, 1, 4, 0.25)
	assert.Contains(t, w.String(), "] run 2/4: 1/4 ops, ")
}

// The time left shrinks while one long op runs: a thousand small ops and
// then a GEMM that is most of the work.
func TestEstimateShrinks(t *testing.T) {
	var w bytes.Buffer
	clock := &manualClock{t: time.Unix(0, 0)}
	b := New(&w, 1, Clock(clock.now))
	times := make([]time.Duration, 1001)
	for i := range 1000 {
		times[i] = time.Millisecond
	}
	times[1000] = 100 * time.Second
	share := shares(times)
	lastLeft := func() string {
		out := w.String()
		return strings.TrimRight(out[strings.LastIndex(out, "ops, ")+len("ops, "):], " ")
	}
	clock.at(time.Second) // the small ops took the second the model says
	b.Ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "1.67 min left", lastLeft())
	clock.at(50 * time.Second) // the GEMM runs
	b.Ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "51.0 s left", lastLeft())
	clock.at(110 * time.Second) // and runs longer than the estimate
	b.Ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "taking longer than estimated", lastLeft())
}

// Where the writer is not a terminal, a long run says where it is in a
// line every LineEvery, and a short one says nothing.
func TestLines(t *testing.T) {
	var w bytes.Buffer
	clock := &manualClock{t: time.Unix(0, 0)}
	b := New(&w, 10, Clock(clock.now), Lines("dagrun run: progress: "))
	clock.at(10 * time.Second)
	b.Runs(1)
	clock.at(20 * time.Second)
	b.Runs(2)
	assert.Empty(t, w.String())
	clock.at(30 * time.Second)
	b.Runs(3)
	b.Ops(4, 5, 10, 0.5)
	assert.Equal(t, "dagrun run: progress: 3/10 runs, 0.1/s, 1.17 min left (30.0 s so far)\n", w.String())
	w.Reset()
	clock.at(60 * time.Second)
	b.Ops(5, 5, 10, 0.5)
	assert.Equal(t, "dagrun run: progress: run 5/10: 5/10 ops, 1.22 min left (1.00 min so far)\n", w.String())
	b.Clear()
	assert.NotContains(t, w.String(), "\r")
}

func TestShares(t *testing.T) {
	assert.Equal(t, []float64{0, 0.5, 1}, shares([]time.Duration{0, time.Nanosecond}))
	assert.Equal(t, []float64{0}, shares(nil))
}
