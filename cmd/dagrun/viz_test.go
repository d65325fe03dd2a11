package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/trace"
)

// bigTrace is a trace of n slices on one stream: slow enough to draw that
// a signal arrives while the picture is being written.
func bigTrace(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"traceEvents":[{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"s","stream":0,"stream_name":"s","device":0,"priority":0,"kind":"compute"}}`)
	for i := range n {
		fmt.Fprintf(&b, `,{"name":"k%d","ph":"X","ts":%d,"dur":1,"pid":1,"tid":1,"args":{"op":"k%d","op_id":%d,"kind":"launch"}}`, i, 2*i, i, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestVizInterrupt: SIGTERM while viz writes its picture ends it with
// status 130 and leaves neither the picture nor its temporary file.
func TestVizInterrupt(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "t.json")
	require.NoError(t, os.WriteFile(in, bigTrace(300_000), 0o644))
	out := filepath.Join(dir, "t.svg")
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if tmps, _ := filepath.Glob(filepath.Join(dir, ".t.svg.*.tmp")); len(tmps) > 0 {
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
		}
	}()
	var errOut bytes.Buffer
	code := run([]string{"viz", in, "-o", out}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	close(stop)
	assert.Equal(t, exitInterrupted, code, "stderr: %s", errOut.String())
	assert.Contains(t, errOut.String(), "interrupted")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range left {
		assert.Equal(t, "t.json", e.Name(), "viz left %s behind", e.Name())
	}
}

// TestVizRefusesHugeTrace: a trace file larger than viz reads is refused
// at once, saying its size and the limit, before any of it is read.
func TestVizRefusesHugeTrace(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(in, bigTrace(1), 0o644))
	require.NoError(t, os.Truncate(in, trace.MaxReadBytes+1)) // sparse: costs no disk
	var errOut bytes.Buffer
	code := run([]string{"viz", in, "-o", filepath.Join(dir, "t.svg")}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "big.json: the trace is 256.0 MiB, more than the 256.0 MiB viz reads")
	assert.NoFileExists(t, filepath.Join(dir, "t.svg"))
}
