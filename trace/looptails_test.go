package trace_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/trace"
)

// TestLoopTails: a loop of many iterations leaves MaxLoopSlices slices of
// each body op and sums up the rest per op, keeping the iteration count,
// the critical path and the makespan; the summary survives the trace file.
func TestLoopTails(t *testing.T) {
	const n = 3 * trace.MaxLoopSlices
	p := loopPlan(t)
	spans := []executor.Span{{Op: 0, Stream: 0, Start: 0, End: 10 * us}}
	for k := range n {
		at := 10*us + time.Duration(k)*13*us
		spans = append(spans, executor.Span{Op: 3, Stream: 7, Start: at, End: at + 10*us}, executor.Span{Op: 4, Stream: 7, Start: at + 11*us, End: at + 13*us})
	}
	end := 10*us + n*13*us
	spans = append(spans, executor.Span{Op: 2, Stream: 0, Start: end, End: end + 10*us})

	tr := trace.FromRun(p, spans)
	assert.Len(t, tr.Slices, 2+2*trace.MaxLoopSlices)
	assert.Equal(t, []trace.LoopRun{{Op: 1, Name: "refine", Iterations: n}}, tr.Loops)
	require.Len(t, tr.Tails, 2)
	tail := tr.Tails[0]
	assert.Equal(t, "refine/scale0", tail.Name)
	assert.Equal(t, n-trace.MaxLoopSlices, tail.Slices)
	assert.Equal(t, time.Duration(n-trace.MaxLoopSlices)*10*us, tail.Busy)
	assert.Equal(t, 10*us, tail.Min)
	assert.Equal(t, end-3*us, tail.End)
	assert.Equal(t, end+10*us, tr.Makespan())
	assert.Equal(t, end+10*us, tr.Figures.CriticalPath, "the loop counts from its first iteration to its last")
	s := tr.Summarize()
	require.Len(t, s.Streams, 1)
	assert.Equal(t, 2+2*n, s.Streams[0].Ops, "the summed-up slices count")

	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	assert.Less(t, buf.Len(), 2<<20, "the file grows with MaxLoopSlices, not with the iterations")
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	assert.Equal(t, tr.Tails, back.Tails)
	assert.Equal(t, tr.Loops, back.Loops)
}

// TestReadChromeRefusesHuge: a trace file beyond MaxReadBytes is an error
// saying so, read no further.
func TestReadChromeRefusesHuge(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 256 MiB")
	}
	huge := strings.NewReader(`{"traceEvents":[` + strings.Repeat(" ", trace.MaxReadBytes) + `]}`)
	_, err := trace.ReadChrome(huge)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than 256 MiB")
}
