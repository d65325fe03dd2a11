package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

func terminal(is bool) func(io.Writer) bool { return func(io.Writer) bool { return is } }

func TestProgress(t *testing.T) {
	var stderr bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0)}
	c := &cli{stdout: io.Discard, stderr: &stderr, terminal: terminal(true), now: clock.now}
	p := c.newProgress(100, false)

	clock.step = 100 * time.Millisecond
	p.update(1)
	if stderr.Len() != 0 {
		t.Fatalf("drew %q before %s had passed", stderr.String(), progressDelay)
	}
	clock.step = progressDelay
	p.update(25)
	first := stderr.String()
	if !strings.HasPrefix(first, "\r[") || !strings.Contains(first, "] 25/100 runs, ") || !strings.HasSuffix(first, " left") {
		t.Fatalf("bar = %q, want \"\\r[...] 25/100 runs, RATE/s, ETA left\"", first)
	}
	clock.step = 10 * time.Millisecond
	p.update(26)
	if stderr.String() != first {
		t.Fatalf("drew again %s after the last drawing: %q", clock.step, stderr.String())
	}
	clock.step = 200 * time.Millisecond
	p.update(100)
	if !strings.Contains(stderr.String()[len(first):], "] 100/100 runs") {
		t.Fatalf("second drawing = %q", stderr.String()[len(first):])
	}
	p.clear()
	out := stderr.String()
	last := out[strings.LastIndex(out[:len(out)-1], "\r"):]
	if strings.Trim(last, "\r ") != "" || len(last) < len(first) {
		t.Fatalf("output ends with %q, want the bar cleared by \\r, spaces, \\r", last)
	}
	p.clear()
	if stderr.String() != out {
		t.Errorf("clearing twice wrote %q", stderr.String()[len(out):])
	}
}

func TestProgressElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		terminal bool
		quiet    bool
	}{
		{"not a terminal", false, false},
		{"quiet", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			clock := &fakeClock{t: time.Unix(0, 0), step: time.Second}
			c := &cli{stdout: io.Discard, stderr: &stderr, terminal: terminal(tc.terminal), now: clock.now}
			p := c.newProgress(10, tc.quiet)
			for i := range 10 {
				p.update(i + 1)
			}
			p.clear()
			if stderr.Len() != 0 {
				t.Errorf("wrote %q", stderr.String())
			}
		})
	}
}

// TestRunProgress runs specs eagerly and as graphs with a clock slow
// enough for the bar: on a terminal it is drawn and cleared before the
// summary, and it never is elsewhere, with --json, or where host steps
// print to the terminal.
func TestRunProgress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "count.yaml")
	const src = `buffers:
  d:   {dtype: f32, count: 4, init: zeros}
  one: {dtype: f32, count: 4, init: {value: 1}}
  h:   {dtype: f32, count: 4, placement: pinned}
outputs: [h]
ops:
  - {launch: axpy, args: {y: d, x: one, alpha: 1}}
  - copy: {from: d, to: h}
`
	hostFile := filepath.Join(t.TempDir(), "host.yaml")
	const hostSrc = src + `  - {host: checksum, reads: h}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostFile, []byte(hostSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file     string
		args     []string
		terminal bool
		bar      bool
	}{
		{file, []string{"--repeat", "10"}, true, true},
		{file, []string{"--repeat", "10", "--graph"}, true, true},
		{file, []string{"--repeat", "10", "--graph"}, false, false},
		{file, []string{"--repeat", "10", "--json"}, true, false},
		{file, []string{"--repeat", "1"}, true, false},
		{hostFile, []string{"--repeat", "10"}, true, false},
	} {
		name := filepath.Base(tc.file) + " " + strings.Join(tc.args, " ")
		if !tc.terminal {
			name += " elsewhere"
		}
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			clock := &fakeClock{t: time.Unix(0, 0), step: 300 * time.Millisecond}
			c := &cli{stdout: &stdout, stderr: &stderr, terminal: terminal(tc.terminal), now: clock.now}
			args := append([]string{tc.file, "--backend", "cpu"}, tc.args...)
			if err := c.run(args); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), "sum=") && !strings.Contains(stdout.String(), `"sum"`) {
				t.Errorf("stdout has no outputs:\n%s", stdout.String())
			}
			got := stderr.String()
			if !tc.bar {
				if got != "" {
					t.Errorf("stderr = %q, want nothing", got)
				}
				return
			}
			if !strings.Contains(got, "] 10/10 runs") {
				t.Errorf("stderr = %q, want a bar at 10/10 runs", got)
			}
			if !strings.HasSuffix(got, " \r") || strings.TrimRight(got[strings.LastIndex(got[:len(got)-1], "\r"):], "\r ") != "" {
				t.Errorf("stderr = %q, want it to end clearing the bar", got)
			}
		})
	}
}

// Within a run the bar shows the ops done; a single run draws no bar of
// runs.
func TestProgressOps(t *testing.T) {
	var stderr bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0), step: progressDelay}
	c := &cli{stdout: io.Discard, stderr: &stderr, terminal: terminal(true), now: clock.now}
	p := c.newProgress(1, false)
	p.update(1)
	if stderr.Len() != 0 {
		t.Fatalf("one run drew %q", stderr.String())
	}
	p.ops(1, 5, 10, 0.5)
	if got := stderr.String(); !strings.HasPrefix(got, "\r[============            ] 5/10 ops, ") || !strings.HasSuffix(got, " left") {
		t.Fatalf("bar = %q, want half full at 5/10 ops with the time left", got)
	}
	stderr.Reset()
	p = c.newProgress(4, false)
	p.ops(2, 1, 4, 0.25)
	if got := stderr.String(); !strings.Contains(got, "] run 2/4: 1/4 ops, ") {
		t.Fatalf("bar = %q, want run 2/4: 1/4 ops", got)
	}
}

// A run longer than the bar's delay, on the CPU backend, draws its ops
// done while it is in flight.
func TestRunProgressWithinRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a second")
	}
	file := filepath.Join(t.TempDir(), "slow.yaml")
	const src = `ops:
  - {launch: spin, args: {us: 400000}, name: a}
  - {launch: spin, args: {us: 400000}, name: b, after: [a]}
  - {launch: spin, args: {us: 400000}, after: [b]}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, terminal: terminal(true)}
	if err := c.run([]string{file, "--backend", "cpu", "--streams", "1"}); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "/3 ops") {
		t.Errorf("stderr = %q, want the ops done drawn", stderr.String())
	}
}

// manualClock reads the time it was set to.
type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time { return c.t }

func (c *manualClock) at(d time.Duration) { c.t = time.Unix(0, 0).Add(d) }

// The time left shrinks while one long op runs: a thousand small ops and
// then a GEMM that is most of the work.
func TestProgressEstimateShrinks(t *testing.T) {
	var stderr bytes.Buffer
	clock := &manualClock{t: time.Unix(0, 0)}
	c := &cli{stdout: io.Discard, stderr: &stderr, terminal: terminal(true), now: clock.now}
	p := c.newProgress(1, false)
	times := make([]time.Duration, 1001)
	for i := range 1000 {
		times[i] = time.Millisecond
	}
	times[1000] = 100 * time.Second
	share := workShares(times)
	lastLeft := func() string {
		out := stderr.String()
		return strings.TrimRight(out[strings.LastIndex(out, "ops, ")+len("ops, "):], " ")
	}
	clock.at(time.Second) // the small ops took the second the model says
	p.ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "1.67 min left", lastLeft())
	clock.at(50 * time.Second) // the GEMM runs
	p.ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "51.0 s left", lastLeft())
	clock.at(110 * time.Second) // and runs longer than the estimate
	p.ops(1, 1000, 1001, share[1000])
	assert.Equal(t, "taking longer than estimated", lastLeft())
}

// Where stderr is not a terminal, a long run says where it is in a line
// every progressLines, and a short one says nothing.
func TestProgressLines(t *testing.T) {
	var stderr bytes.Buffer
	clock := &manualClock{t: time.Unix(0, 0)}
	c := &cli{stdout: io.Discard, stderr: &stderr, terminal: terminal(false), now: clock.now}
	p := c.newProgress(10, false)
	clock.at(10 * time.Second)
	p.update(1)
	clock.at(20 * time.Second)
	p.update(2)
	assert.Empty(t, stderr.String())
	clock.at(30 * time.Second)
	p.update(3)
	p.ops(4, 5, 10, 0.5)
	assert.Equal(t, "dagrun run: progress: 3/10 runs, 0.1/s, 1.17 min left (30.0 s so far)\n", stderr.String())
	stderr.Reset()
	clock.at(60 * time.Second)
	p.ops(5, 5, 10, 0.5)
	assert.Equal(t, "dagrun run: progress: run 5/10: 5/10 ops, 1.22 min left (1.00 min so far)\n", stderr.String())
	p.clear()
	assert.NotContains(t, stderr.String(), "\r")
}
