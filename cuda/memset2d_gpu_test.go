//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// TestMemset2DMatchesCPU sets strided regions of device and host buffers
// of 1-, 2- and 4-byte elements, on one stream and on several, and
// compares every buffer with the sequential reference and the CPU backend.
func TestMemset2DMatchesCPU(t *testing.T) {
	b := gpuBackend(t)
	for _, streams := range []int{1, 4} {
		g := dag.New()
		u8 := g.Buffer("u8", 1<<12, dag.OnDevice(0), dag.Of(dag.U8), dag.Random(1))
		f16 := g.Buffer("f16", 1<<12, dag.OnDevice(0), dag.Of(dag.F16), dag.Random(2))
		f32 := g.Buffer("f32", 1<<12, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(3))
		pinned := g.Buffer("pinned", 1<<10, dag.PinnedHost(), dag.Of(dag.I32), dag.Random(4))
		out := g.Buffer("out", 1<<12, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
		g.Memset2D(u8.Slice(3, u8.Size-3), dag.Memset2DSpec{Rows: 7, Width: 100, Pitch: 129}, 200)
		g.Memset2D(f16.Slice(2, f16.Size-2), dag.Memset2DSpec{Rows: 9, Width: 33, Pitch: 256}, -1.5)
		g.Memset2D(f32.All(), dag.Memset2DSpec{Rows: 16, Width: 17, Pitch: 256}, 3.25)
		g.Memset2D(pinned.Slice(8, 512), dag.Memset2DSpec{Rows: 5, Width: 10, Pitch: 64}, -7)
		g.Copy(out.All(), f32.All()) // reads what the memset wrote
		gr, err := g.Build()
		require.NoError(t, err)
		runGraph(t, b, gr, 0, planner.Streams(streams))
	}
}
