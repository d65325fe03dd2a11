package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
