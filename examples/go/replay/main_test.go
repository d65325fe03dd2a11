package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expected computes batch i's results from the pipeline's description:
// out[j] = in[j] * gain + 2, each step rounded to f32 as the kernels
// round, and the sum of out in float64.
func expected(i int) result {
	var sum float64
	for j := range n {
		in := 0.25 * float32(i+j%10)
		sum += float64(float32(in*float32(1+0.5*float64(i))) + 2)
	}
	return result{Sum: float32(sum), Checksum: sum}
}

func TestReplay(t *testing.T) {
	const batches = 6
	var out bytes.Buffer
	got, err := run(context.Background(), &out, "cpu", batches)
	require.NoError(t, err)
	require.Len(t, got, batches)
	for i, r := range got {
		assert.Equal(t, expected(i), r, "batch %d", i)
	}
	text := out.String()
	assert.Contains(t, text, "batch 1 (from in1, gain 1.5)")
	assert.Contains(t, text, "batch 2 (from in0, gain 2.0)")
	// Batch 0 runs the graph as captured; every later batch updates it in place.
	assert.Contains(t, text, "6 replays, 5 updates: 5 in place, 0 re-instantiated")
	assert.Equal(t, batches+2, strings.Count(text, "\n"))
}

func TestReplayAuto(t *testing.T) {
	got, err := run(context.Background(), new(bytes.Buffer), "auto", 3)
	require.NoError(t, err)
	for i, r := range got {
		assert.Equal(t, expected(i), r, "batch %d", i)
	}
	_, err = run(context.Background(), new(bytes.Buffer), "tpu", 1)
	assert.ErrorContains(t, err, "unknown backend")
}
