package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startDagrun starts this test binary as the dagrun command (TestMain
// runs it by that name) with args, its standard input a pipe.
func startDagrun(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "dagrun")
	require.NoError(t, os.Symlink(exe, bin))
	cmd := exec.Command(bin, args...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return cmd, in
}

// exitCode waits for cmd and returns its exit status; -1 when a signal
// ended it.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return cmd.ProcessState.ExitCode()
}

// A signal that comes while dagrun reads its spec (here from standard
// input) finds dagrun's handler, not Go's default (which ends the process
// by the signal: 143 for SIGTERM): the run does not start and dagrun exits
// with 130.
func TestSignalWhileReadingSpec(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, in := startDagrun(t, "run", "--backend", "cpu", "-")
			// dagrun is blocked reading its spec by then; a loaded 2-core
			// machine has taken over 300 ms to get there.
			time.Sleep(time.Second)
			require.NoError(t, cmd.Process.Signal(sig))
			time.Sleep(100 * time.Millisecond)
			_, err := io.WriteString(in, longRun)
			require.NoError(t, err)
			require.NoError(t, in.Close())
			assert.Equal(t, exitInterrupted, exitCode(t, cmd))
		})
	}
}

// A second Ctrl-C ends dagrun at once with 130, even when the first has
// not stopped it yet (here it is still reading its spec).
func TestSecondInterruptExitsAtOnce(t *testing.T) {
	cmd, in := startDagrun(t, "run", "--backend", "cpu", "-")
	defer in.Close()
	time.Sleep(time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan int, 1)
	go func() { done <- exitCode(t, cmd) }()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code)
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("a second SIGINT did not end dagrun")
	}
}

// endlessLoop is a while that validate accepts (no max) and whose flag
// nothing clears: it runs until it is stopped.
const endlessLoop = `buffers:
  x:    {dtype: f32, count: 16, init: {value: 1}}
  flag: {dtype: i32, count: 1, init: {value: 1}}
ops:
  - while: flag
    body:
      - {launch: scale, args: {x: x, alpha: 1}}
`

// An endless loop on the CPU backend runs in constant memory (it once
// kept every iteration's instructions, hundreds of MB a second) and stops
// at SIGTERM within a second, with 130.
func TestEndlessLoopStopsAtSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an endless loop for two seconds")
	}
	cmd, in := startDagrun(t, "run", "--backend", "cpu", "-")
	_, err := io.WriteString(in, endlessLoop)
	require.NoError(t, err)
	require.NoError(t, in.Close())
	time.Sleep(2 * time.Second)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	require.NoError(t, err)
	rss := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(status)
	require.NotNil(t, rss, "%s", status)
	kb, err := strconv.Atoi(string(rss[1]))
	require.NoError(t, err)
	assert.Less(t, kb, 100<<10, "resident KiB after two seconds of the loop")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan int, 1)
	go func() { done <- exitCode(t, cmd) }()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code)
	case <-time.After(time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("SIGTERM did not stop the endless loop within a second")
	}
}
