//go:build cgo

package cuda

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// TestTraceOverlap traces the double-buffering example on the GPU and
// checks that its copies and kernels overlap in time, and that the trace
// summary's figures are those of the measured spans, computed here again
// by a plain sweep over them.
func TestTraceOverlap(t *testing.T) {
	b := gpuBackend(t)
	s, err := spec.Load("../examples/double_buffer.yaml")
	require.NoError(t, err)
	p, err := planner.New(s.Graph, planner.Streams(s.Run.Streams))
	require.NoError(t, err)
	ctx := context.Background()
	sess, err := executor.Open(ctx, b, p, executor.WithTiming())
	require.NoError(t, err)
	defer func() { require.NoError(t, sess.Close()) }()
	for range 3 { // the last run is timed warm
		require.NoError(t, sess.Run(ctx))
	}
	spans := sess.Spans()
	require.Len(t, spans, len(p.Graph.Ops))

	// The sweep: between consecutive span boundaries, is a copy running,
	// and a kernel?
	var cuts []time.Duration
	first, last := spans[0].Start, spans[0].End
	for _, sp := range spans {
		cuts = append(cuts, sp.Start, sp.End)
		first, last = min(first, sp.Start), max(last, sp.End)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	running := func(kind func(dag.OpKind) bool, from, to time.Duration) bool {
		for _, sp := range spans {
			if kind(p.Graph.Ops[sp.Op].Kind) && sp.Start <= from && to <= sp.End {
				return true
			}
		}
		return false
	}
	isCopy := func(k dag.OpKind) bool { return k == dag.Copy }
	isKernel := func(k dag.OpKind) bool { return k == dag.Launch || k == dag.Fill }
	var copyBusy, kernelBusy, overlap time.Duration
	for i := 1; i < len(cuts); i++ {
		c, k := running(isCopy, cuts[i-1], cuts[i]), running(isKernel, cuts[i-1], cuts[i])
		d := cuts[i] - cuts[i-1]
		if c {
			copyBusy += d
		}
		if k {
			kernelBusy += d
		}
		if c && k {
			overlap += d
		}
	}

	sum := trace.FromRun(p, spans).Summarize()
	t.Logf("OVERLAP copies and kernels overlap %v of makespan %v (copy %v, kernel %v); summary says %v of %v",
		overlap, last-first, copyBusy, kernelBusy, sum.Overlap, sum.Makespan)
	assert.Positive(t, overlap, "copies and kernels of the double-buffering example never ran at once")
	assert.Equal(t, last-first, sum.Makespan)
	assert.Equal(t, copyBusy, sum.CopyBusy)
	assert.Equal(t, kernelBusy, sum.KernelBusy)
	assert.Equal(t, overlap, sum.Overlap)
}
