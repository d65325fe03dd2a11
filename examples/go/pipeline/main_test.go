package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
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
	x := in.InitialBytes()
	want := make([]byte, len(x))
	var sum float64
	for i := 0; i < len(x); i += 4 {
		v := float32(3*math.Float32frombits(binary.LittleEndian.Uint32(x[i:]))) + 0.25
		binary.LittleEndian.PutUint32(want[i:], math.Float32bits(v))
		sum += float64(v)
	}
	p, err := planner.New(g, planner.Options{Streams: 2})
	require.NoError(t, err)
	mem, err := executor.Execute(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	assert.Equal(t, want, mem[out])
	assert.Equal(t, math.Float32bits(float32(sum)), binary.LittleEndian.Uint32(mem[total]))

	var w bytes.Buffer
	require.NoError(t, run(context.Background(), &w))
	assert.Contains(t, w.String(), fmt.Sprintf("out: %s\n", spec.Checksum(want, dag.F32)))
	assert.Regexp(t, `^plan: 11 ops on \d+ streams, \d+ waits for \d+ cross-stream edges\n`, w.String())
}
