//go:build cgo

package cuda

import (
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

// shapesMLP is the MLP block of examples/mlp_stream_small.yaml (D = 64,
// H = 256, two chunks) with T a parameter and the hidden activations in
// a temporary, so that the shapes share an arena as well as their
// persistent buffers.
const shapesMLP = `params:
  T: {default: 16, min: 16, max: 1024, multiple_of: 16}
buffers:
  h_x: {dtype: bf16, count: T * 128, placement: pinned, init: {random: 1}}
  h_y: {dtype: bf16, count: T * 128, placement: pinned}
  w1:  {dtype: bf16, count: 16384, init: {random: 2}}
  w2:  {dtype: bf16, count: 16384, init: {random: 3}}
  x:   {dtype: bf16, count: T * 64}
  h:   {dtype: bf16, count: T * 256, temporary: true}
  y:   {dtype: bf16, count: T * 64}
ops:
  - {copy: {from: "h_x[0:T*128]", to: x}, name: up0}
  - {gemm: {a: x, b: w1, c: h, m: T, n: 256, k: 64, alpha: 0.015625}, name: fc1_0}
  - {launch: gelu, args: {y: h, x: h}, name: gelu0}
  - {gemm: {a: h, b: w2, c: x, d: y, m: T, n: 64, k: 256, alpha: 0.00390625, beta: 1}, name: fc2_0}
  - {copy: {from: y, to: "h_y[0:T*128]"}, name: down0}
  - {copy: {from: "h_x[T*128:T*256]", to: x}, name: up1}
  - {gemm: {a: x, b: w1, c: h, m: T, n: 256, k: 64, alpha: 0.015625}, name: fc1_1}
  - {launch: gelu, args: {y: h, x: h}, name: gelu1}
  - {gemm: {a: h, b: w2, c: x, d: y, m: T, n: 64, k: 256, alpha: 0.00390625, beta: 1}, name: fc2_1}
  - {copy: {from: y, to: "h_y[T*128:T*256]"}, name: down1}
outputs: [h_y]
`

// nearBF16 compares bf16 buffers element by element within tol: cuBLASLt
// and the CPU backend accumulate in f32 in other orders, so a rounding
// may land on the other side.
func nearBF16(got, want []byte, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes, want %d", len(got), len(want))
	}
	for i := 0; i+2 <= len(got); i += 2 {
		g := float64(dag.BF16ToFloat32(binary.LittleEndian.Uint16(got[i:])))
		w := float64(dag.BF16ToFloat32(binary.LittleEndian.Uint16(want[i:])))
		if math.Abs(g-w) > tol {
			return fmt.Errorf("element %d is %v, want %v", i/2, g, w)
		}
	}
	return nil
}

// TestShapesGPU runs three shapes of one program from one cuda Shapes,
// captured and replayed, then eager, each equal to the CPU backend's run
// of that shape alone; the shapes share one arena, as large as the
// largest plan's, and one copy of the persistent buffers. It logs the
// device memory the Shapes holds against the largest shape's session
// alone.
func TestShapesGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	s, err := spec.Parse("shapes_mlp.yaml", []byte(shapesMLP))
	require.NoError(t, err)
	values := []map[string]int64{{"T": 64}, {"T": 16}, {"T": 256}}
	want := map[int64][]byte{}
	for _, v := range values {
		at, err := s.At(v)
		require.NoError(t, err)
		out, err := executor.Execute(ctx, cpu.New(), planOf(t, at.Graph))
		require.NoError(t, err)
		for buf, data := range out {
			if buf.Name == "h_y" {
				want[v["T"]] = data
			}
		}
	}
	for _, mode := range []executor.GraphMode{executor.GraphAlways, executor.GraphNever} {
		t.Run(mode.String(), func(t *testing.T) {
			shapes, err := executor.OpenShapes(ctx, b, s.Shape, executor.WithGraph(mode), executor.WithInitialContents())
			require.NoError(t, err)
			defer func() { require.NoError(t, shapes.Close()) }()
			var largest int64
			for round := range 2 {
				for _, v := range values {
					sr, err := shapes.Run(ctx, v)
					require.NoError(t, err, "T=%d", v["T"])
					assert.Equal(t, mode == executor.GraphAlways && !sr.Opened, sr.Replayed, "T=%d: a replay, but for the first run, eager while it is captured", v["T"])
					assert.Equal(t, mode == executor.GraphAlways && sr.Opened, sr.Captured, "T=%d", v["T"])
					for _, u := range sr.Plan.Memory.Memories {
						if u.Device == 0 {
							largest = max(largest, u.ArenaBytes)
						}
					}
					y, err := shapes.Read("h_y")
					require.NoError(t, err)
					require.NoError(t, nearBF16(y, want[v["T"]], 1.0/64), "round %d, T=%d", round, v["T"])
				}
			}
			held, shared, why := shapes.Memory()
			require.True(t, shared, why)
			for _, h := range held {
				if h.Memory == 0 {
					assert.Equal(t, largest, h.Arena, "one arena, the largest plan's")
				}
			}
			t.Logf("%s: held %+v", mode, held)
		})
	}
}

// TestShapesMemoryGPU opens examples/mlp_stream.yaml at T = 512, 2048 and
// 8192 in one cuda Shapes (the buckets, captured when it opens), replays
// each, and compares the device memory the Shapes holds with a session
// of T = 8192 alone, captured and replayed the same way: at most 1.1x.
// Each shape's output equals a session of its own on the GPU byte for
// byte. It logs both figures for the lead's table.
func TestShapesMemoryGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("1.5 GiB of pinned inputs and 4.4 TFLOP a shape: not in -short")
	}
	b := gpuBackend(t)
	ctx := context.Background()
	s, err := spec.Load("../examples/mlp_stream.yaml")
	require.NoError(t, err)
	values := []map[string]int64{{"T": 512}, {"T": 2048}, {"T": 8192}}
	largest := values[len(values)-1]
	freeNow := func() int64 {
		f, _, err := b.FreeMemory(0)
		require.NoError(t, err)
		return f
	}
	// A first session loads the modules and cuBLASLt, which the backend
	// keeps: neither measure below counts them.
	warm, err := s.At(map[string]int64{"T": 16})
	require.NoError(t, err)
	_, err = executor.Execute(ctx, b, planOf(t, warm.Graph))
	require.NoError(t, err)

	own := map[int64][]byte{}
	before := freeNow()
	at, err := s.At(largest)
	require.NoError(t, err)
	alone, err := executor.Open(ctx, b, planOf(t, at.Graph))
	require.NoError(t, err)
	g, err := alone.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Run(ctx))
	aloneBytes := before - freeNow()
	own[largest["T"]] = readNamed(t, alone, at.Graph, "h_y")
	require.NoError(t, alone.Close())
	for _, v := range values[:len(values)-1] {
		at, err := s.At(v)
		require.NoError(t, err)
		out, err := executor.Execute(ctx, b, planOf(t, at.Graph))
		require.NoError(t, err)
		for buf, data := range out {
			if buf.Name == "h_y" {
				own[v["T"]] = data
			}
		}
	}

	before = freeNow()
	shapes, err := executor.OpenShapes(ctx, b, s.Shape, executor.WithBuckets(values...), executor.WithInitialContents())
	require.NoError(t, err)
	for round := range 2 {
		for _, v := range values {
			sr, err := shapes.Run(ctx, v)
			require.NoError(t, err)
			require.True(t, sr.Replayed, "T=%d", v["T"])
			y, err := shapes.Read("h_y")
			require.NoError(t, err)
			require.Equal(t, own[v["T"]], y, "round %d, T=%d: the shape equals its own session", round, v["T"])
		}
	}
	shapesBytes := before - freeNow()
	held, shared, why := shapes.Memory()
	require.True(t, shared, why)
	require.NoError(t, shapes.Close())
	ratio := float64(shapesBytes) / float64(aloneBytes)
	t.Logf("device memory: one Shapes of T=512, 2048, 8192 (captured, replayed) %s; T=8192 alone %s; %.3fx; held %+v",
		dag.FormatBytes(shapesBytes), dag.FormatBytes(aloneBytes), ratio, held)
	assert.LessOrEqual(t, ratio, 1.1, "the Shapes holds at most 1.1x the largest shape alone")
}

// planOf plans g for the GPU.
func planOf(t *testing.T, g *dag.Graph) *planner.Plan {
	t.Helper()
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

// readNamed reads the persistent buffer called name of s.
func readNamed(t *testing.T, s *executor.Session, g *dag.Graph, name string) []byte {
	t.Helper()
	for _, buf := range g.Buffers {
		if buf.Name == name {
			data, err := s.Read(buf)
			require.NoError(t, err)
			return data
		}
	}
	t.Fatalf("no buffer %s", name)
	return nil
}
