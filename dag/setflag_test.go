package dag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestSetFlagVariants(t *testing.T) {
	for _, dt := range []dag.DType{dag.F32, dag.F64} {
		b := dag.New()
		flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
		x := b.Buffer("x", 64, dag.Of(dt), dag.Zeros())
		op := b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(x.All()), 1e-3)
		_, err := b.Build()
		require.NoError(t, err, dt)
		k := op.Launch.Kernel
		assert.Equal(t, dt, k.ElemDType())
		assert.Equal(t, dag.I32, k.ParamDType(0), "the flag is i32 in every variant")
		assert.Equal(t, dt, k.ParamDType(1))
		want := "set_flag"
		if dt == dag.F64 {
			want = "set_flag_f64"
		}
		assert.Equal(t, want, k.EntryName())
	}
	assert.Equal(t, []dag.DType{dag.F32, dag.F64}, dag.SetFlag.ElemDTypes())
	assert.False(t, dag.SetFlag.HalfTypes())
	assert.Equal(t, []dag.DType{dag.F32, dag.F16, dag.BF16}, dag.Scale.ElemDTypes())
	assert.Nil(t, dag.Spin.ElemDTypes())
	assert.Same(t, dag.SetFlag, dag.LookupBuiltin("set_flag"))
}

func TestSetFlagRefusals(t *testing.T) {
	for _, tc := range []struct {
		name             string
		flagDT, xDT      dag.DType
		flagSize, xSize  int64
		field, msg, hint string
	}{
		{"flag not i32", dag.F32, dag.F32, 4, 64, "args.flag", "flag is f32, but set_flag takes i32", "declare flag as i32"},
		{"half x", dag.I32, dag.F16, 4, 64, "args.x", "works on f32 or f64 elements, not f16", "use f32 or f64 buffers"},
		{"short f64 x", dag.I32, dag.F64, 4, 4, "args.x", "not a whole number of f64 elements", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			flag := b.Buffer("flag", 64, dag.Of(tc.flagDT), dag.Zeros())
			x := b.Buffer("x", 64, dag.Of(tc.xDT), dag.Zeros())
			b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.Slice(0, tc.flagSize)), dag.In(x.Slice(0, tc.xSize)), 0.5, dag.Name("sf"))
			_, err := b.Build()
			require.Error(t, err)
			e := err.(dag.ErrorList)[0]
			assert.Equal(t, "sf", e.Op)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Msg, tc.msg)
			assert.Contains(t, e.Hint, tc.hint)
		})
	}
}
