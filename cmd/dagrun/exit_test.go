package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/trace"

	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// signalWriter sends sig to this process on its first write: the run is
// under way by then (a host step prints), with its handler installed.
type signalWriter struct {
	mu    sync.Mutex
	sig   syscall.Signal
	after int // writes to let pass before the signal
	once  sync.Once
	buf   bytes.Buffer
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.after--; w.after < 0 {
		w.once.Do(func() { syscall.Kill(os.Getpid(), w.sig) })
	}
	return w.buf.Write(p)
}

// longRun is a spec whose runs take a while on the CPU backend, with a
// host step that prints at the start of each.
const longRun = `buffers:
  h: {dtype: f32, count: 1024, placement: pinned, init: zeros}
  d: {dtype: f32, count: 1048576}
ops:
  - host: checksum
    reads: h
  - {launch: iota, args: {x: d, start: 1}}
  - {launch: scale, args: {x: d, alpha: 2}}
  - {launch: scale, args: {x: d, alpha: 0.5}}
  - copy: {from: "d[0:4KiB]", to: h}
outputs: [h]
`

// TestInterrupt: SIGINT or SIGTERM during a long run stops it, frees
// everything and exits with status 130.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.yaml")
	require.NoError(t, os.WriteFile(path, []byte(longRun), 0o644))
	// A short run first: os/signal starts its watcher once, for good.
	require.Equal(t, exitOK, run([]string{"run", path, "--backend", "cpu"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}))
	tests := []struct {
		sig          syscall.Signal
		graph, trace bool
		world        bool // two ranks in this process
	}{
		{syscall.SIGINT, false, false, false}, {syscall.SIGTERM, false, false, false}, {syscall.SIGINT, true, false, false},
		{syscall.SIGINT, false, true, false}, {syscall.SIGINT, false, true, true},
	}
	for _, tc := range tests {
		sig := tc.sig
		name := sig.String()
		if tc.graph {
			name += " graph"
		}
		if tc.trace {
			name += " trace"
		}
		if tc.world {
			name += " world"
		}
		t.Run(name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			out := &signalWriter{sig: sig}
			if tc.trace {
				out.after = 3 // runs complete before the signal
			}
			var errOut bytes.Buffer
			start := time.Now()
			args := []string{"run", path, "--backend", "cpu", "--repeat", "1000000"}
			if tc.graph {
				args = append(args, "--graph")
			}
			tracePath := filepath.Join(dir, name+".json")
			if tc.world {
				args = append(args, "--world", "2")
				tracePath = filepath.Join(dir, name+"{rank}.json")
			}
			if tc.trace {
				args = append(args, "--trace", tracePath)
			}
			code := run(args, strings.NewReader(""), out, &errOut)
			assert.Equal(t, exitInterrupted, code, "stderr: %s", errOut.String())
			assert.Less(t, time.Since(start), time.Minute, "the run did not stop promptly")
			assert.Regexp(t, `(?m)^`+regexpQuote(path)+`: interrupted after \d+ of 1000000 runs completed; the one in flight was abandoned and everything was freed`, errOut.String())
			assert.NotContains(t, out.buf.String(), "ran ", "an interrupted run prints no summary")
			if tc.trace && tc.world {
				// Each rank's runs that completed are kept.
				for r := range 2 {
					rankPath := strings.ReplaceAll(tracePath, "{rank}", fmt.Sprint(r))
					assert.Contains(t, errOut.String(), fmt.Sprintf("trace of rank %d written to %s", r, rankPath))
					f, err := os.Open(rankPath)
					require.NoError(t, err)
					tr, err := trace.ReadChrome(f)
					f.Close()
					require.NoError(t, err)
					assert.NotEmpty(t, tr.Slices)
				}
			} else if tc.trace {
				// The runs that completed are kept, in a whole trace.
				m := regexp.MustCompile(`the trace of the (\d+) traced runs? that completed was written to (.*)\n`).FindStringSubmatch(errOut.String())
				require.NotNil(t, m, errOut.String())
				assert.Equal(t, tracePath, m[2])
				f, err := os.Open(tracePath)
				require.NoError(t, err)
				defer f.Close()
				tr, err := trace.ReadChrome(f)
				require.NoError(t, err)
				assert.NotEmpty(t, tr.Slices)
			}
			// Everything the run started has ended.
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
		})
	}
}

func regexpQuote(s string) string {
	r := strings.NewReplacer(`.`, `\.`, `(`, `\(`, `)`, `\)`, `[`, `\[`, `]`, `\]`, `+`, `\+`)
	return r.Replace(s)
}

// TestInternalErrors: a plan that fails verification, and a panic, exit
// with status 3 and say that it is a bug, in text and in JSON.
func TestInternalErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`buffers:
  d: {dtype: f32, count: 1024}
  h: {dtype: f32, count: 1024, placement: pinned, init: zeros}
ops:
  - {launch: iota, args: {x: d, start: 1}, name: make}
  - copy: {from: d, to: h}
    name: fetch
outputs: [h]
`), 0o644))
	c0 := &cli{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	s, err := c0.load(path, specFiles{})
	require.NoError(t, err)
	p, err := makePlan(s, job.Layout{})
	require.NoError(t, err)
	require.NotZero(t, p.Stats.Waits, "the test needs a plan with a wait to drop")
	// Drop the waits: the copy is no longer ordered after the kernel.
	var steps []planner.Step
	for _, st := range p.Steps {
		if st.Kind != planner.Wait {
			steps = append(steps, st)
		}
	}
	p.Steps = steps
	verr := verify.Verify(p)
	require.Error(t, verr)

	tests := map[string]struct {
		run     func(*cli, []string) error
		json    bool
		stderr  []string
		stdout  []string
		nothing bool
	}{
		"verifier": {
			run:    func(*cli, []string) error { return verifyFailure(s, verr) },
			stderr: []string{`spec.yaml:\d+:\d+: op "\w+" the plan failed verification: plan: unordered `, `this is a bug in dagrun`},
		},
		"verifier json": {
			run:    func(c *cli, _ []string) error { c.jsonErrors = true; return verifyFailure(s, verr) },
			stdout: []string{`"status": 3`, `"op": "(make|fetch)"`, `"message": "the plan failed verification: `},
		},
		"panic": {
			run:    func(*cli, []string) error { panic("index out of range") },
			stderr: []string{`^dagrun plan: internal error: index out of range\n`, `this is a bug in dagrun`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			code := c.exec(command{name: "plan", run: tc.run}, nil)
			assert.Equal(t, exitInternal, code)
			for _, re := range tc.stderr {
				assert.Regexp(t, re, stderr.String())
			}
			for _, re := range tc.stdout {
				assert.Regexp(t, re, stdout.String())
			}
		})
	}
}
