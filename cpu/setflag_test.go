package cpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

// TestSetFlag checks set_flag on both widths of x, at and around the
// threshold, with the comparison in f64: an f32 x just above a threshold
// that f32 cannot hold still sets the flag.
func TestSetFlag(t *testing.T) {
	third := float64(float32(1.0 / 3))
	for _, tc := range []struct {
		x, threshold float64
		want         uint32
	}{
		{0.5, 0.25, 1},
		{0.25, 0.25, 0},
		{0.1, 0.25, 0},
		{-1, -2, 1},
		{math.Inf(1), 1e300, 1},
		{math.NaN(), 0, 0},
		{third, 1.0 / 3, 1}, // float32(1/3) is above 1/3
	} {
		for _, dt := range []dag.DType{dag.F32, dag.F64} {
			t.Run(fmt.Sprintf("%s/%v>%v", dt, tc.x, tc.threshold), func(t *testing.T) {
				g := build(t, func(b *dag.Builder) {
					// The flag starts at 7, so a kernel that writes nothing fails.
					flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Contents(dag.ElemBytes(dag.I32, 7)))
					x := b.Buffer("x", 2*dt.Size(), dag.Of(dt), dag.Contents(append(dag.ElemBytes(dt, tc.x), dag.ElemBytes(dt, 99)...)))
					b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(x.All()), tc.threshold)
				})
				out := execute(t, plan(t, g, 1))
				assert.Equal(t, tc.want, binary.LittleEndian.Uint32(out["flag"]))
			})
		}
	}
}
