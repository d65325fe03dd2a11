package dag_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// TestCallByName: arguments by name land on their parameters whatever
// their order; a misspelled or missing name is a Build error at the op.
func TestCallByName(t *testing.T) {
	b := dag.New()
	x := b.Array("x", dag.F32, 16, dag.Value(1))
	y := b.Array("y", dag.F32, 16, dag.Zeros())
	o := b.Call(dag.Axpy, dag.Grid1(1), dag.Threads(16), dag.Args{"alpha": 2, "x": x, "y": y})
	_, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, y, o.Access[o.Launch.Args[0].Access].Buf, "y is the written parameter")
	require.Equal(t, dag.ReadWrite, o.Access[o.Launch.Args[0].Access].Mode)
	require.Equal(t, x, o.Access[o.Launch.Args[1].Access].Buf)
	require.Equal(t, 2.0, o.Launch.Args[2].Float)

	for _, tt := range []struct {
		name string
		args func(x, y *dag.Buffer) dag.Args
		want []string
	}{
		{"misspelled", func(x, y *dag.Buffer) dag.Args { return dag.Args{"y": y, "x": x, "alpah": 2} },
			[]string{`op "axpy": kernel axpy has no parameter "alpah" (did you mean "alpha"?)`, `parameter alpha of kernel axpy has no argument`}},
		{"unknown", func(x, y *dag.Buffer) dag.Args { return dag.Args{"y": y, "x": x, "alpha": 2, "beta": 1} },
			[]string{`kernel axpy has no parameter "beta" (axpy takes y, x, alpha)`}},
		{"scalar for a buffer", func(x, y *dag.Buffer) dag.Args { return dag.Args{"y": 2.0, "x": x, "alpha": y} },
			[]string{`parameter y takes a buffer`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			x := b.Array("x", dag.F32, 16, dag.Value(1))
			y := b.Array("y", dag.F32, 16, dag.Zeros())
			b.Call(dag.Axpy, dag.Grid1(1), dag.Threads(16), tt.args(x, y), dag.Name("axpy"))
			_, err := b.Build()
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// TestBuiltinParamOrder: every builtin takes its parameters in one order,
// which Call's names and Launch's positions share: the buffers it writes,
// then those it only reads, then the scalars.
func TestBuiltinParamOrder(t *testing.T) {
	rank := func(p dag.Param) int {
		switch {
		case p.Kind != dag.BufferParam:
			return 2
		case p.Mode.Writes():
			return 0
		}
		return 1
	}
	for _, k := range dag.Builtins() {
		for i := 1; i < len(k.Params); i++ {
			require.LessOrEqual(t, rank(k.Params[i-1]), rank(k.Params[i]), "%s: %s before %s", k.Name, k.Params[i-1].Name, k.Params[i].Name)
		}
	}
}

// TestScalarArgsFitTheirParams: a positional scalar is checked against
// the kernel's declared parameter: whole numbers for integers, a value
// f32 holds for f32.
func TestScalarArgsFitTheirParams(t *testing.T) {
	k := &dag.Kernel{Name: "k", Source: dag.CUDAC, Code: "x", Params: []dag.Param{
		{Name: "x", Kind: dag.BufferParam, Mode: dag.Write}, {Name: "n", Kind: dag.I32Param}, {Name: "a", Kind: dag.F32Param}}}
	for _, tt := range []struct {
		name string
		n, a any
		want string
	}{
		{"fits", 4, float32(0.5), ""},
		{"fraction for i32", 2.5, 1.0, "parameter n: 2.5 is not a whole number, and i32 takes one"},
		{"beyond f32", 4, 1e300, "parameter a: 1e+300 is beyond the largest f32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			b.Kernel(k)
			x := b.Array("x", dag.F32, 4)
			b.Launch(k, dag.Grid1(1), dag.Threads(4), x, tt.n, tt.a)
			_, err := b.Build()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// Arguments by name: the buffers cannot trade places unnoticed, and a
// misspelled name is an error with the nearest one as a hint.
func ExampleBuilder_Call() {
	b := dag.New()
	x := b.Array("x", dag.F32, 256, dag.Value(1))
	y := b.Array("y", dag.F32, 256, dag.Zeros())
	b.Call(dag.Axpy, dag.Grid1(1), dag.Threads(256), dag.Args{"y": y, "x": x, "alpha": 2})
	b.Call(dag.Scale, dag.Grid1(1), dag.Threads(256), dag.Args{"x": y, "alpah": 0.5}, dag.Name("half"))
	_, err := b.Build()
	fmt.Println(err)
	// Output:
	// op "half": kernel scale has no parameter "alpah" (did you mean "alpha"?)
	// op "half": parameter alpha of kernel scale has no argument (name every parameter: x, alpha)
}

// TestAtMost: a loop's bound is an option of While, checked by Build.
func TestAtMost(t *testing.T) {
	b := dag.New()
	flag := b.Array("flag", dag.I32, 1, dag.Value(1))
	loop := b.While(flag.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, dag.AtMost(5))
	_, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, int64(5), loop.Control.Max)

	b = dag.New()
	flag = b.Array("flag", dag.I32, 1, dag.Value(1))
	b.While(flag.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, dag.AtMost(-1), dag.Name("w"))
	_, err = b.Build()
	require.ErrorContains(t, err, `op "w": max -1 is out of range`)
}

// TestSplitInto: the blocks an all_reduce asks the planner for are an
// option of AllReduce alone, from 1 to MaxSplit.
func TestSplitInto(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(b *dag.Builder, v dag.View)
		want string // an error, or "" for Split 4
	}{
		{"all_reduce", func(b *dag.Builder, v dag.View) { b.AllReduce(v, dag.Sum, dag.SplitInto(4), dag.Name("r")) }, ""},
		{"zero", func(b *dag.Builder, v dag.View) { b.AllReduce(v, dag.Sum, dag.SplitInto(0), dag.Name("r")) }, `op "r": split 0 is out of range (use 1 (whole) to 64 blocks of rows)`},
		{"too many", func(b *dag.Builder, v dag.View) { b.AllReduce(v, dag.Sum, dag.SplitInto(65), dag.Name("r")) }, `split 65 is out of range`},
		{"broadcast", func(b *dag.Builder, v dag.View) { b.Broadcast(v, 0, dag.SplitInto(2), dag.Name("r")) }, `option SplitInto does not apply to broadcast ops`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			x := b.Array("x", dag.F32, 64, dag.OnDevice(0), dag.Zeros())
			tc.op(b, x.All())
			g, err := b.Build()
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 4, g.Ops[0].Collective.Split)
		})
	}
}
