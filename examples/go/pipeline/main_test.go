package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

func TestPipeline(t *testing.T) {
	g, out, total, err := pipeline()
	require.NoError(t, err)
	in := g.Buffers[0]
	require.Equal(t, "in", in.Name)

	// out = 3 * in + 0.25, the sum of out accumulated in float64.
	x, err := dag.DecodeValues[float32](in.DType, in.InitialBytes())
	require.NoError(t, err)
	want := make([]float32, len(x))
	var sum float64
	for i, v := range x {
		want[i] = 3*v + 0.25
		sum += float64(want[i])
	}
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	mem, err := executor.Execute(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	got, err := executor.Values[float32](mem, out)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, []float32{float32(sum)}, mem.Float32s(total))

	var w bytes.Buffer
	require.NoError(t, run(context.Background(), &w))
	assert.Contains(t, w.String(), fmt.Sprintf("out: %s\n", spec.Checksum(mem[out], dag.F32)))
	assert.Regexp(t, `^plan: 11 ops on \d+ streams, \d+ waits for \d+ cross-stream edges\n`, w.String())
}
