package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestTypedValues: data crosses the API as the Go type of each buffer's
// elements, half types as float32, and the wrong type is an error rather
// than garbage.
func TestTypedValues(t *testing.T) {
	ctx := context.Background()
	b := dag.New()
	h := b.Array("h", dag.BF16, 4, dag.Data([]float32{1, 2.5, -3, 0.125}))
	w := b.Array("w", dag.I32, 3, dag.PinnedHost(), dag.Uninitialized())
	f := b.Array("f", dag.F64, 2, dag.Data([]float64{1e300, -2}))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(4), h, 2.0)
	out := b.Array("out", dag.I32, 3, dag.PinnedHost())
	b.Copy(out.All(), w.All())
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)

	sess, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer sess.Close()
	require.NoError(t, executor.WriteValues(sess, w, []int32{7, -8, 9}))
	require.ErrorContains(t, executor.WriteValues(sess, w, []float32{7, 8, 9}), "i32 elements are not float32: use []int32")
	require.ErrorContains(t, executor.WriteValues(sess, w, []int32{7}), "give 3 values")
	require.NoError(t, sess.Run(ctx))
	got, err := executor.ReadValues[int32](sess, out)
	require.NoError(t, err)
	require.Equal(t, []int32{7, -8, 9}, got)
	hv, err := executor.ReadValues[float32](sess, h)
	require.NoError(t, err)
	require.Equal(t, []float32{2, 5, -6, 0.25}, hv)
	_, err = executor.ReadValues[float64](sess, h)
	var dt *dag.DTypeError
	require.ErrorAs(t, err, &dt)
	require.Equal(t, dag.BF16, dt.DType)

	results, err := executor.Execute(ctx, cpu.New(), p)
	require.NoError(t, err)
	require.Equal(t, []float32{2, 5, -6, 0.25}, results.Float32s(h), "bf16 decoded, not read as f32 bits")
	fv, err := executor.Values[float64](results, f)
	require.NoError(t, err)
	require.Equal(t, []float64{1e300, -2}, fv)
	_, err = executor.Values[float32](results, f)
	require.ErrorContains(t, err, `Values of "f": f64 elements are not float32: use []float64`)
	require.Nil(t, results.Float32s(f))
}

// TestDataOption: initial data of the wrong Go type, or encoded for a type
// the buffer no longer has, is a Build error.
func TestDataOption(t *testing.T) {
	for _, tt := range []struct {
		name    string
		declare func(b *dag.Builder)
		want    string
	}{
		{"wrong Go type", func(b *dag.Builder) { b.Array("x", dag.I32, 2, dag.Data([]float32{1, 2})) },
			`buffer "x": initial data: i32 elements are not float32: use []int32`},
		{"too few values", func(b *dag.Builder) { b.Array("x", dag.F32, 3, dag.Data([]float32{1, 2})) },
			`buffer "x": initial contents hold 8 bytes, the buffer 12`},
		{"type changed after", func(b *dag.Builder) { b.Buffer("x", 8, dag.Data([]float32{1, 2}), dag.Of(dag.I32)) },
			`buffer "x": initial data was encoded as f32, and the buffer is i32`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.declare(b)
			_, err := b.Build()
			require.ErrorContains(t, err, tt.want)
		})
	}
}
