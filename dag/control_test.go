package dag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestWhileDependencies(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	y := b.Buffer("y", 4096, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	init := b.Fill(x.All(), 1, dag.Name("init"))
	setup := b.Fill(flag.All(), 1, dag.Name("setup"))
	loop := b.While(flag.All(), func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 0.5)
		body.Fill(flag.All(), 0, dag.Name("stop"))
	}, dag.Name("refine"), dag.AtMost(10))
	after := b.Copy(y.All(), x.All(), dag.Name("after"))
	unrelated := b.Fill(y.Slice(0, 4), 2, dag.Name("unrelated"))
	g, err := b.Build()
	require.NoError(t, err)

	assert.ElementsMatch(t, []int32{int32(init.ID), int32(setup.ID)}, loop.Deps)
	assert.Contains(t, after.Deps, int32(loop.ID))
	assert.NotContains(t, unrelated.Deps, int32(loop.ID), "unrelated writes y only, which the body does not touch")
	require.Len(t, loop.Bodies(), 1)
	body := loop.Control.Body
	require.Len(t, body.Ops, 2)
	assert.Equal(t, "refine/scale0", body.Ops[0].Name)
	assert.Empty(t, body.Ops[1].Deps, "the two touch different buffers")
	var names []string
	g.Walk(func(o *dag.Op) { names = append(names, o.Name) })
	assert.Equal(t, []string{"init", "setup", "refine", "refine/scale0", "stop", "after", "unrelated"}, names)
	assert.Contains(t, g.Kernels, dag.Scale)
}

// TestControlHoldsHostWork: a body may hold host steps, tasks and copies
// to and from host memory; whether a backend's loops can run them is the
// backend's to say when a session opens (the cuda backend cannot).
func TestControlHoldsHostWork(t *testing.T) {
	host := func(context.Context, [][]byte) error { return nil }
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	h := b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
	loop := b.While(flag.All(), func(body *dag.Builder) {
		body.Copy(h.All(), x.Slice(0, 64))
		body.Host(host, dag.InOut(h.All()))
		body.Task(func(context.Context, dag.TaskStream) error { return nil }, dag.InOut(x.All()), dag.Name("t"), dag.RunsOnCPU())
	})
	_, err := b.Build()
	require.NoError(t, err)
	assert.Len(t, loop.Control.Body.Ops, 3)
}

func TestControlRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *dag.Builder, x, flag, h *dag.Buffer)
		op    string
		msg   string
	}{
		{"alloc", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			tmp := b.Buffer("tmp", 64, dag.Temporary())
			b.While(flag.All(), func(body *dag.Builder) { body.Alloc(tmp, dag.Name("a")) })
		}, "a", "cannot hold a alloc"},
		{"collective", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			b.If(flag.All(), func(body *dag.Builder) { body.AllReduce(x.All(), dag.Sum, dag.Name("ar")) }, nil)
		}, "ar", "cannot hold a all_reduce"},
		{"other device", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			z := b.Buffer("z", 64, dag.OnDevice(1), dag.Zeros())
			b.While(flag.All(), func(body *dag.Builder) { body.Fill(z.All(), 0, dag.Name("far")) })
		}, "far", "runs on device 1"},
		{"flag type", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			b.While(x.Slice(0, 4), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, dag.Name("w"))
		}, "w", "not i32"},
		{"flag on host", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			hf := b.Buffer("hf", 4, dag.Of(dag.I32), dag.PinnedHost(), dag.Zeros())
			b.While(hf.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, dag.Name("w"))
		}, "w", "pinned memory"},
		{"buffer in body", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			b.While(flag.All(), func(body *dag.Builder) { body.Buffer("inner", 4, dag.Zeros()) }, dag.Name("w"))
		}, "w", "declares buffer inner"},
		{"max on if", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			b.If(flag.All(), func(body *dag.Builder) { body.Fill(x.All(), 0) }, nil, dag.Name("w"), dag.AtMost(3))
		}, "w", "option AtMost does not apply to if ops"},
		{"duplicate name", func(b *dag.Builder, x, flag, h *dag.Buffer) {
			b.Fill(x.All(), 0, dag.Name("same"))
			b.While(flag.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0, dag.Name("same")) })
		}, "same", "used by two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			x := b.Buffer("x", 4096, dag.Zeros())
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
			h := b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
			tc.build(b, x, flag, h)
			_, err := b.Build()
			require.Error(t, err)
			var found bool
			for _, e := range err.(dag.ErrorList) {
				if e.Op == tc.op {
					assert.Contains(t, e.Error(), tc.msg)
					found = true
				}
			}
			assert.True(t, found, "no error names %s: %v", tc.op, err)
		})
	}
}

func TestNestedControl(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	flag := b.Buffer("flag", 8, dag.Of(dag.I32), dag.Zeros())
	outer := b.While(flag.Slice(0, 4), func(body *dag.Builder) {
		body.If(flag.Slice(4, 4), func(then *dag.Builder) {
			then.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 2.0)
		}, func(els *dag.Builder) {
			els.Fill(x.All(), 1)
		})
		body.Fill(flag.Slice(0, 4), 0)
	}, dag.Name("outer"))
	_, err := b.Build()
	require.NoError(t, err)
	inner := outer.Control.Body.Ops[0]
	assert.Equal(t, dag.If, inner.Kind)
	assert.Len(t, inner.Bodies(), 2)
	assert.Equal(t, "outer/if0", inner.Name)
	// Building again gives the same accesses, not twice as many.
	n := len(outer.Access)
	_, err = b.Build()
	require.NoError(t, err)
	assert.Len(t, outer.Access, n)
}

func TestIndexNumbersEveryOp(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	flag := b.Buffer("flag", 8, dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1)
	b.While(flag.Slice(0, 4), func(body *dag.Builder) {
		body.If(flag.Slice(4, 4), func(then *dag.Builder) { then.Fill(x.All(), 2) }, nil)
		body.Fill(flag.Slice(0, 4), 0)
	})
	b.Fill(x.All(), 3)
	g, err := b.Build()
	require.NoError(t, err)
	require.Len(t, g.Nested, 3)
	seen := map[int]bool{}
	g.Walk(func(o *dag.Op) {
		assert.False(t, seen[o.Index], "index %d twice", o.Index)
		seen[o.Index] = true
		assert.Same(t, o, g.OpAt(o.Index))
	})
	assert.Len(t, seen, 6)
	assert.Nil(t, g.OpAt(6))
	assert.Nil(t, g.OpAt(-1))
}

func TestBranchesNameTheirOpsApart(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	br := b.If(flag.All(), func(then *dag.Builder) { then.Fill(x.All(), 1) },
		func(els *dag.Builder) { els.Fill(x.All(), 2) }, dag.Name("pick"))
	_, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, "pick/fill0", br.Control.Body.Ops[0].Name)
	assert.Equal(t, "pick/else/fill0", br.Control.Else.Ops[0].Name)
}
