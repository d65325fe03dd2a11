package dag_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// builtinArgs are the arguments of a launch of k whose free buffers are of
// dtype dt (fixed ones of their own dtype) and whose scalars are 1, valid
// for every builtin.
func builtinArgs(b *dag.Builder, k *dag.Kernel, dt dag.DType) []any {
	var args []any
	for i, p := range k.Params {
		if p.Kind != dag.BufferParam {
			args = append(args, 1)
			continue
		}
		bdt := dt
		if i == 0 && k == dag.SetFlag {
			bdt = dag.I32
		}
		args = append(args, b.Buffer(p.Name, 64, dag.Of(bdt), dag.Zeros()))
	}
	return args
}

// TestBuiltinDTypes: a builtin takes exactly the dtypes it has a kernel
// for (the table's ElemDTypes, which both backends implement); any other
// is a Build error naming the op and the argument, never bytes read as f32.
func TestBuiltinDTypes(t *testing.T) {
	for _, k := range dag.Builtins() {
		if k.ElemDTypes() == nil {
			continue
		}
		for _, dt := range dag.DTypes() {
			t.Run(k.Name+"/"+dt.String(), func(t *testing.T) {
				b := dag.New()
				op := b.Launch(k, dag.Grid1(1), dag.Threads(1), builtinArgs(b, k, dt)...).With(dag.Name("op1"))
				_, err := b.Build()
				if slices.Contains(k.ElemDTypes(), dt) {
					require.NoError(t, err)
					assert.Equal(t, dt, op.Launch.Kernel.ElemDType())
					return
				}
				require.Error(t, err)
				var list dag.ErrorList
				require.ErrorAs(t, err, &list)
				e := list[0]
				assert.Equal(t, "op1", e.Op)
				assert.Regexp(t, `^args\.`, e.Field)
				assert.Contains(t, e.Msg, k.Name+" works on f32")
				assert.Contains(t, e.Msg, "not "+dt.String())
			})
		}
	}
}
