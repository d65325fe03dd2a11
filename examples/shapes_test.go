package examples_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

// mlp_stream.yaml, written once with T as a parameter, is at its default
// the fixed-size block it was: the same buffers, views and GEMMs (and so
// the same plan and outputs).
func TestMLPStreamDefault(t *testing.T) {
	s, err := spec.Load("mlp_stream.yaml")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"T": 2048}, s.Values())
	assert.Empty(t, s.Paddable(), "chunk i starts at i x T rows: padding would move them")
	sizes := map[string]int64{"h_x": 128 << 20, "h_y": 128 << 20, "w1": 128 << 20, "w2": 128 << 20,
		"x0": 16 << 20, "y0": 16 << 20, "x1": 16 << 20, "y1": 16 << 20, "h0": 64 << 20, "h1": 64 << 20}
	require.Len(t, s.Graph.Buffers, len(sizes))
	for _, b := range s.Graph.Buffers {
		assert.Equal(t, sizes[b.Name], b.Size, b.Name)
		assert.Equal(t, dag.BF16, b.DType, b.Name)
	}
	for c := range 8 {
		up, down := opNamed(t, s, fmt.Sprintf("up%d", c)), opNamed(t, s, fmt.Sprintf("down%d", c))
		assert.Equal(t, dag.View{Buf: up.Access[0].Buf, Offset: int64(c) << 24, Size: 16 << 20}, up.Access[0].View, "up%d", c)
		assert.Equal(t, dag.View{Buf: down.Access[1].Buf, Offset: int64(c) << 24, Size: 16 << 20}, down.Access[1].View, "down%d", c)
		for _, fc := range []string{"fc1_", "fc2_"} {
			assert.Equal(t, int64(2048), opNamed(t, s, fmt.Sprintf("%s%d", fc, c)).Gemm.M, "%s%d", fc, c)
		}
	}
}

func opNamed(t *testing.T, s *spec.Spec, name string) *dag.Op {
	for _, op := range s.Graph.Ops {
		if op.Name == name {
			return op
		}
	}
	t.Fatalf("%s has no op %s", s.File, name)
	return nil
}

// mlp_stream.yaml at two shapes from one executor.Shapes on the CPU
// backend: each computes the block (the reference check), and equals a
// session of its own byte for byte. About 30 s on 2 cores: with
// DAGRUN_LARGE_EXAMPLES=1 only.
func TestMLPStreamShapes(t *testing.T) {
	if os.Getenv("DAGRUN_LARGE_EXAMPLES") != "1" {
		t.Skip("GEMMs of 4096 x 16384 on the cpu backend; set DAGRUN_LARGE_EXAMPLES=1 to run it")
	}
	s, err := spec.Load("mlp_stream.yaml")
	require.NoError(t, err)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	shapes, err := executor.OpenShapes(ctx, b, s.Shape, executor.WithInitialContents())
	require.NoError(t, err)
	defer shapes.Close()
	for _, T := range []int64{32, 16} {
		v := map[string]int64{"T": T}
		_, err := shapes.Run(ctx, v)
		require.NoError(t, err)
		at, err := s.At(v)
		require.NoError(t, err)
		y, err := shapes.Read("h_y")
		require.NoError(t, err)
		out := map[*dag.Buffer][]byte{}
		for _, buf := range at.Graph.Buffers {
			if buf.Name == "h_y" {
				out[buf] = y
			}
		}
		mlpCheck(int(T), 4096, 16384, int(T)-1)(t, bufferValues(t, at, nil), bufferValues(t, at, out))
		alone, err := executor.Run(ctx, at.Graph, executor.WithBackend("cpu"))
		require.NoError(t, err)
		for buf, data := range alone {
			if buf.Name == "h_y" {
				require.Equal(t, data, y, "T=%d: the shape equals a session of its own", T)
			}
		}
	}
}
