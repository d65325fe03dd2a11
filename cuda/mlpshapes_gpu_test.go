//go:build cgo

package cuda

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// bf16Floats reads little-endian bf16 values.
func bf16Floats(b []byte) []float64 {
	out := make([]float64, len(b)/2)
	for i := range out {
		out[i] = float64(dag.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	return out
}

// TestMLPStreamShapesGPU: examples/mlp_stream.yaml, written once with T a
// parameter, run at T = 512, 2048 and 8192 from one cuda Shapes: each
// shape's first run is eager while its graph is captured, the second a
// replay of that graph, and they write the same bytes. Each output is the
// block as dagtest.MLPRow works it out on the host (the reference the cpu
// backend's run of the example is checked against), on the first and last
// row of every chunk; at T = 2048 it is, byte for byte, a session of the
// spec at its default: the fixed-size file it was.
func TestMLPStreamShapesGPU(t *testing.T) {
	be := gpuBackend(t)
	ctx := context.Background()
	s, err := spec.Load("../examples/mlp_stream.yaml")
	require.NoError(t, err)
	const d, h = 4096, 16384
	sh, err := executor.OpenShapes(ctx, be, s.Shape, executor.WithInitialContents())
	require.NoError(t, err)
	defer sh.Close()
	var w1, w2 []float64
	outputs := map[int64][]byte{}
	for _, T := range []int64{512, 2048, 8192} {
		v := map[string]int64{"T": T}
		sr, err := sh.Run(ctx, v)
		if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) {
			requireGPU(t, "no cuBLASLt: %v", err)
		}
		require.NoError(t, err, "T=%d", T)
		require.True(t, sr.Opened && !sr.Replayed, "T=%d: the first run opens the shape, eagerly", T)
		eager, err := sh.Read("h_y")
		require.NoError(t, err)
		sr, err = sh.Run(ctx, v)
		require.NoError(t, err)
		require.True(t, sr.Replayed, "T=%d: the second run replays its graph", T)
		replayed, err := sh.Read("h_y")
		require.NoError(t, err)
		require.Equal(t, eager, replayed, "T=%d: a replay writes what the eager run wrote", T)
		outputs[T] = replayed

		if w1 == nil {
			b1, err := sh.Read("w1")
			require.NoError(t, err)
			b2, err := sh.Read("w2")
			require.NoError(t, err)
			w1, w2 = bf16Floats(b1), bf16Floats(b2)
		}
		hx, err := sh.Read("h_x")
		require.NoError(t, err)
		x, y := bf16Floats(hx), bf16Floats(replayed)
		rows := int(T)
		require.Len(t, y, 8*rows*d)
		for c := range 8 {
			for _, r := range []int{0, rows - 1} {
				at := (c*rows + r) * d
				want := dagtest.MLPRow(x[at:at+d], w1, w2, d, h)
				for e, w := range want {
					if got := y[at+e]; math.Abs(got-w) > dagtest.MLPTolerance {
						t.Fatalf("T=%d chunk %d row %d: y[%d] = %v, want %v", T, c, r, e, got, w)
					}
				}
			}
		}
	}
	m, err := executor.MachineOf(be, s.Graph)
	require.NoError(t, err)
	p, err := planner.New(s.Graph, m.Options()...)
	require.NoError(t, err)
	fixed, err := executor.Execute(ctx, be, p)
	require.NoError(t, err)
	for buf, data := range fixed {
		if buf.Name == "h_y" {
			require.Equal(t, data, outputs[2048], "T=2048 from the Shapes against the spec at its default")
		}
	}
}
