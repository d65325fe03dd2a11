package job

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

func TestShapeValues(t *testing.T) {
	got := ShapeValues([]string{"T", "U"}, [][]int64{{16, 32}, {1, 2, 3}})
	want := []map[string]int64{
		{"T": 16, "U": 1}, {"T": 16, "U": 2}, {"T": 16, "U": 3},
		{"T": 32, "U": 1}, {"T": 32, "U": 2}, {"T": 32, "U": 3},
	}
	assert.Equal(t, want, got)
}

const shapesSpec = `params:
  T: {default: 16, min: 16, max: 4096}
buffers:
  x: {dtype: f32, count: T, init: {value: 1}}
  y: {size: "4096 * 4 - T * 4", init: zeros}
ops:
  - launch: scale
    args: {x: x, alpha: 2}
  - {fill: {buffer: y, value: 1}}
outputs: [x]
`

// A mistake of the spec at one of the values comes back before anything
// runs, placed, saying at which values; the shapes that load run, each
// equal to a run of it alone.
func TestRunShapes(t *testing.T) {
	s, err := spec.Parse("s.yaml", []byte(shapesSpec))
	require.NoError(t, err)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	_, err = RunShapes(ctx, b, s, ShapeValues([]string{"T"}, [][]int64{{16, 4096}}), Config{Backend: "cpu", Repeat: 1})
	errs := spec.Errors(err)
	require.Len(t, errs, 1, "%v", err)
	assert.Contains(t, errs[0].Error(), "s.yaml:5:")
	assert.Contains(t, errs[0].Error(), "(at T=4096)")
	r, err := RunShapes(ctx, b, s, ShapeValues([]string{"T"}, [][]int64{{32, 16}}), Config{Backend: "cpu", Repeat: 2, Graph: executor.GraphAlways})
	require.NoError(t, err)
	r.Wait()
	require.Len(t, r.Shapes, 2)
	assert.Equal(t, 32*4, r.Shapes[0].Outputs[0].Bytes)
	assert.Equal(t, spec.JSONFloat(16*4), r.Shapes[1].Outputs[0].Sum, "16 ones doubled twice")
	assert.True(t, r.Shared)
	require.Len(t, r.Memory, 1)
	assert.Equal(t, int64(32*4+(4096-16)*4), r.Memory[0].Persistent, "x at T=32 and y at T=16, each at its largest")
}
