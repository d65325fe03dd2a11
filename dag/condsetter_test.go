package dag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// TestCondSetter: a While's condition may be set by the body's set_flag
// only when that launch writes the loop's own flag element and nothing in
// the body follows it.
func TestCondSetter(t *testing.T) {
	one, thread := dag.Grid1(1), dag.Threads(1)
	type bufs struct {
		x, y, x64, flag, other *dag.Buffer
		flags                  *dag.Buffer // two flags in one buffer
	}
	for _, tc := range []struct {
		name string
		// build declares the graph and returns the loop asked about.
		build func(b *dag.Builder, v bufs) *dag.Op
		want  string // the setter's name; "" for none
	}{
		{"ends in set_flag on its flag", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.Scale, one, thread, v.x, 0.5, dag.Name("halve"))
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, "again"},
		{"f64 x", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x64, 0.25, dag.Name("again"))
			}, dag.AtMost(3), dag.Name("loop"))
		}, "again"},
		{"independent work beside it", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.Scale, one, thread, v.x, 0.5, dag.Name("halve"))
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
				body.Launch(dag.Scale, one, thread, v.y, 2.0, dag.Name("beside"))
			}, dag.Name("loop"))
		}, "again"},
		{"set_flag on another flag", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.other, v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, ""},
		{"set_flag on the next element of the flag's buffer", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flags.Slice(0, 4), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flags.Slice(4, 4), v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, ""},
		{"set_flag on a view that starts at the flag", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flags.Slice(0, 4), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flags.All(), v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, "again"},
		{"x changed after it", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
				body.Launch(dag.Scale, one, thread, v.x, 0.5, dag.Name("halve"))
			}, dag.Name("loop"))
		}, ""},
		{"flag written after it", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
				body.Fill(v.flag.All(), 0, dag.Name("stop"))
			}, dag.Name("loop"))
		}, ""},
		{"body ends in a kernel that writes the flag", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Fill(v.flag.All(), 0, dag.Name("stop"))
			}, dag.Name("loop"))
		}, ""},
		{"set_flag inside an if of the body", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.If(v.other.All(), func(then *dag.Builder) {
					then.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
				}, nil, dag.Name("pick"))
			}, dag.Name("loop"))
		}, ""},
		{"if/else before set_flag", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.If(v.other.All(), func(then *dag.Builder) {
					then.Launch(dag.Scale, one, thread, v.x, 0.5)
				}, func(els *dag.Builder) {
					els.Launch(dag.Scale, one, thread, v.x, 0.25)
				}, dag.Name("pick"))
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, "again"},
		{"an if: no iterations", func(b *dag.Builder, v bufs) *dag.Op {
			return b.If(v.flag.All(), func(then *dag.Builder) {
				then.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
			}, nil, dag.Name("loop"))
		}, ""},
		{"outer loop ends in its inner loop", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
				body.While(v.other.All(), func(inner *dag.Builder) {
					inner.Launch(dag.Scale, one, thread, v.x, 0.5)
					inner.Launch(dag.SetFlag, one, thread, v.other, v.x, 0.5, dag.Name("inner_again"))
				}, dag.Name("inner"))
			}, dag.Name("loop"))
		}, ""},
		{"inner loop of a nested pair", func(b *dag.Builder, v bufs) *dag.Op {
			var inner *dag.Op
			b.While(v.flag.All(), func(body *dag.Builder) {
				inner = body.While(v.other.All(), func(ib *dag.Builder) {
					ib.Launch(dag.Scale, one, thread, v.x, 0.5)
					ib.Launch(dag.SetFlag, one, thread, v.other, v.x, 0.5, dag.Name("inner_again"))
				}, dag.Name("inner"))
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
			return inner
		}, "inner_again"},
		{"outer loop of a nested pair", func(b *dag.Builder, v bufs) *dag.Op {
			return b.While(v.flag.All(), func(body *dag.Builder) {
				body.While(v.other.All(), func(ib *dag.Builder) {
					ib.Launch(dag.Scale, one, thread, v.x, 0.5)
					ib.Launch(dag.SetFlag, one, thread, v.other, v.x, 0.5, dag.Name("inner_again"))
				}, dag.Name("inner"))
				body.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
			}, dag.Name("loop"))
		}, "again"},
		{"not a control op", func(b *dag.Builder, v bufs) *dag.Op {
			return b.Launch(dag.SetFlag, one, thread, v.flag, v.x, 0.25, dag.Name("again"))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			v := bufs{
				x:     b.Buffer("x", 4, dag.Value(1)),
				y:     b.Buffer("y", 4, dag.Value(1)),
				x64:   b.Buffer("x64", 8, dag.Of(dag.F64), dag.Value(1)),
				flag:  b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros()),
				other: b.Buffer("other", 4, dag.Of(dag.I32), dag.Zeros()),
				flags: b.Buffer("flags", 8, dag.Of(dag.I32), dag.Zeros()),
			}
			loop := tc.build(b, v)
			_, err := b.Build()
			require.NoError(t, err)
			got := loop.CondSetter()
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
			assert.Contains(t, loop.Control.Body.Ops, got, "an op of the loop's own body")
		})
	}
	assert.Nil(t, (&dag.Op{Kind: dag.While}).CondSetter(), "before Build")
}
