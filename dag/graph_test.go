package dag_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// deps returns the names of op's dependencies.
func deps(g *dag.Graph, name string) []string {
	for _, o := range g.Ops {
		if o.Name == name {
			var out []string
			for _, d := range o.Deps {
				out = append(out, g.Ops[d].Name)
			}
			return out
		}
	}
	return nil
}

func TestInference(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 1024, dag.Zeros())
	y := b.Buffer("y", 1024, dag.Zeros())
	b.Launch(dag.Iota, dag.Grid1(1), dag.Threads(32), x, 0.0, dag.Name("w1"))                // writes x
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x.Slice(0, 512), 2.0, dag.Name("lo")) // RAW+WAW on x[0:512]
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x.Slice(512, 512), 2.0, dag.Name("hi"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), y.Slice(0, 512), x.Slice(0, 512), 1.0, dag.Name("r1")) // reads lo's bytes only
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), y.Slice(512, 512), x.Slice(256, 512), 1.0, dag.Name("r2"))
	b.Fill(x.All(), 0, dag.Name("w2")) // WAR on r1, r2; WAW on lo, hi
	g, err := b.Build()
	require.NoError(t, err)

	assert.Equal(t, []string{"w1"}, deps(g, "lo"))
	assert.Equal(t, []string{"w1"}, deps(g, "hi"), "disjoint ranges do not depend on each other")
	assert.Equal(t, []string{"lo"}, deps(g, "r1"))
	assert.ElementsMatch(t, []string{"lo", "hi"}, deps(g, "r2"))
	assert.ElementsMatch(t, []string{"lo", "hi", "r1", "r2"}, deps(g, "w2"))
}

func TestAfterAndCycles(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	a := b.Fill(x.All(), 1, dag.Name("a"))
	c := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("c"))
	d := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("d"))
	c.With(dag.After(d)) // forward edge: d must come first
	g, err := b.Build()
	require.NoError(t, err)
	var order []string
	for i, o := range g.Ops {
		order = append(order, o.Name)
		for _, dep := range o.Deps {
			assert.Less(t, int(dep), i, "deps point backwards")
		}
	}
	assert.Equal(t, []string{"a", "d", "c"}, order)
	_ = a

	b = dag.New()
	p := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("p"))
	q := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("q"))
	r := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("r"))
	p.With(dag.After(r))
	q.With(dag.After(p))
	r.With(dag.After(q))
	_, err = b.Build()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dependency cycle")
	assert.Regexp(t, `p -> q -> r -> p|q -> r -> p -> q|r -> p -> q -> r`, err.Error())
}

func TestLifetimes(t *testing.T) {
	b := dag.New()
	tmp := b.Buffer("tmp", 256, dag.Temporary())
	out := b.Buffer("out", 256, dag.Zeros())
	b.Fill(tmp.All(), 3, dag.Name("init"))
	b.Launch(dag.Add, dag.Grid1(1), dag.Threads(64), out, tmp, tmp, dag.Name("use"))
	g, err := b.Build()
	require.NoError(t, err)
	var names []string
	for _, o := range g.Ops {
		names = append(names, o.Name)
	}
	assert.Equal(t, []string{"alloc:tmp", "init", "use", "free:tmp"}, names)
	assert.ElementsMatch(t, []string{"use", "init"}, deps(g, "free:tmp"), "the free follows the last writer and every reader since")
	assert.Equal(t, []string{"alloc:tmp"}, deps(g, "init"))
}

func TestBuildErrors(t *testing.T) {
	noop := func(context.Context, [][]byte) error { return nil }
	tests := []struct {
		name  string
		build func(b *dag.Builder)
		op    string
		msg   string
	}{
		{"out of range", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.Zeros())
			b.Fill(x.Slice(32, 64), 0, dag.Name("f"))
		}, "f", "out of range"},
		{"copy size mismatch", func(b *dag.Builder) {
			x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 32, dag.Zeros())
			b.Copy(y.All(), x.All(), dag.Name("c"))
		}, "c", "copy of 64 bytes"},
		{"use after free", func(b *dag.Builder) {
			t := b.Buffer("t", 64, dag.Temporary())
			b.Alloc(t)
			b.Fill(t.All(), 0)
			b.Free(t, dag.Name("fr"))
			b.Fill(t.All(), 1, dag.Name("late"))
		}, "late", "after fr freed it"},
		{"use before alloc", func(b *dag.Builder) {
			t := b.Buffer("t", 64, dag.Temporary())
			b.Fill(t.All(), 0, dag.Name("early"))
			b.Alloc(t)
		}, "early", "before"},
		{"alloc of persistent", func(b *dag.Builder) {
			b.Alloc(b.Buffer("p", 64, dag.Zeros()), dag.Name("a"))
		}, "a", "persistent"},
		{"unknown kernel", func(b *dag.Builder) {
			k := &dag.Kernel{Name: "mine", Source: dag.CUDAC}
			b.Launch(k, dag.Grid1(1), dag.Threads(1), dag.Name("l"))
		}, "l", "not declared"},
		{"bad block", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(2048), dag.Name("l"))
		}, "l", "too large"},
		{"zero grid", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(0), dag.Threads(1), dag.Name("l"))
		}, "l", "below 1"},
		{"arg count", func(b *dag.Builder) {
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), 2.0, dag.Name("l"))
		}, "l", "1 arguments for 2 parameters"},
		{"mode", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.Zeros())
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), dag.In(x.All()), 2.0, dag.Name("l"))
		}, "l", "reads and writes"},
		{"axpy sizes", func(b *dag.Builder) {
			x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 32, dag.Zeros())
			b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), y, x, 1.0, dag.Name("l"))
		}, "l", "equal size"},
		{"host on device memory", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.Zeros())
			b.Host(noop, dag.In(x.All()), dag.Name("h"))
		}, "h", "device buffer"},
		{"kernel on host memory", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.PinnedHost(), dag.Zeros())
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 2.0, dag.Name("l"))
		}, "l", "pinned host memory"},
		{"duplicate names", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("same"))
			b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("same"))
		}, "same", "used by two operations"},
		{"self after", func(b *dag.Builder) {
			o := b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("me"))
			o.With(dag.After(o))
		}, "me", "after itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.build(b)
			_, err := b.Build()
			require.Error(t, err)
			errs := dag.Errors(err)
			require.NotEmpty(t, errs, "errors are *dag.Error: %v", err)
			assert.Equal(t, tt.op, errs[0].Op)
			assert.True(t, strings.Contains(err.Error(), tt.msg), "%q does not mention %q", err, tt.msg)
		})
	}
}

func TestInitialBytes(t *testing.T) {
	b := dag.New()
	r := b.Buffer("r", 4096, dag.Random(7))
	v := b.Buffer("v", 8, dag.Value(1.5))
	_, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, r.InitialBytes(), r.InitialBytes(), "seeded contents are reproducible")
	assert.Equal(t, []byte{0, 0, 0xc0, 0x3f, 0, 0, 0xc0, 0x3f}, v.InitialBytes())
}
