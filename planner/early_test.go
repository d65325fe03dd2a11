package planner_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// earlyNames plans g on one compute stream and returns the names of the
// ops it launches early.
func earlyNames(t *testing.T, g *dag.Graph, opts ...planner.Option) []string {
	t.Helper()
	p := mustPlan(t, g, append([]planner.Option{planner.Streams(1), planner.Verify()}, opts...)...)
	var out []string
	for _, op := range p.Graph.Ops {
		if p.IsEarly(op.ID) {
			out = append(out, op.Name)
		}
	}
	return out
}

// The early pass marks a launch that follows a launch on its stream with no
// wait between, both kernels waiting on the device, a user's grid at most
// 1,024 threads a multiprocessor.
func TestEarlyLaunches(t *testing.T) {
	user := &dag.Kernel{Name: "mine", Source: dag.CUDAC, Code: `extern "C" __global__ void mine(float* x) {}`,
		Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.ReadWrite}}}
	g1, b256 := dag.Grid1(1), dag.Grid1(256)
	for _, tc := range []struct {
		name  string
		build func(b *dag.Builder, x, y *dag.Buffer)
		opts  []planner.Option
		want  []string
	}{
		{"a chain of small builtins", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, dag.Grid1(64), b256, x, 2.0, dag.Name("a"))
			b.Launch(dag.Axpy, dag.Grid1(64), b256, x, y, 0.5, dag.Name("b"))
			b.Launch(dag.Scale, dag.Grid1(132), b256, x, 2.0, dag.Name("c"))
		}, nil, []string{"b", "c"}},
		{"early launch off", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("b"))
		}, []planner.Option{planner.Early(planner.EarlyNone)}, nil},
		{"builtins in waves", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(dag.Scale, dag.Grid1(16384), b256, x, 2.0, dag.Name("big"))
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("after"))
		}, nil, []string{"big", "after"}},
		{"a user kernel of four blocks of 256 a multiprocessor", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(b.Kernel(user), dag.Grid1(4*132), b256, x, dag.Name("u")).Launch.Early = true
		}, nil, []string{"u"}},
		{"a user kernel of more than 1,024 threads a multiprocessor", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(b.Kernel(user), dag.Grid1(4*132+1), b256, x, dag.Name("u")).Launch.Early = true
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("after"))
		}, nil, nil},
		{"a user kernel of more blocks of 1,024 than multiprocessors", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(b.Kernel(user), dag.Grid1(133), dag.Grid1(1024), x, dag.Name("u")).Launch.Early = true
		}, nil, nil},
		{"a fill between", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Fill(x.All(), 1, dag.Name("f"))
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("b"))
		}, nil, nil},
		{"a user kernel that does not say it waits", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(b.Kernel(user), g1, b256, x, dag.Name("u"))
		}, nil, nil},
		{"a user kernel that says it waits", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
			b.Launch(b.Kernel(user), g1, b256, x, dag.Name("u")).Launch.Early = true
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("c"))
		}, nil, []string{"u", "c"}},
		{"the first op of a stream", func(b *dag.Builder, x, y *dag.Buffer) {
			b.Launch(dag.Scale, g1, b256, x, 2.0, dag.Name("a"))
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			x := b.Buffer("x", 1<<16, dag.Zeros())
			y := b.Buffer("y", 1<<16, dag.Value(1))
			tc.build(b, x, y)
			g, err := b.Build()
			require.NoError(t, err)
			assert.Equal(t, tc.want, earlyNames(t, g, tc.opts...))
		})
	}
}

// A wait between two launches keeps the second plain: it brings in another
// stream's work, which the device-side wait does not wait for.
func TestEarlyNotAfterWait(t *testing.T) {
	b := dag.New()
	h := b.Buffer("h", 1<<16, dag.PinnedHost(), dag.Random(1))
	x := b.Buffer("x", 1<<16, dag.Zeros())
	y := b.Buffer("y", 1<<16, dag.Zeros())
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(256), x, 2.0, dag.Name("a"))
	b.Copy(y.All(), h.All(), dag.Name("up"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(256), x, y, 1.0, dag.Name("b"))
	g, err := b.Build()
	require.NoError(t, err)
	p := mustPlan(t, g, planner.Streams(1), planner.Verify())
	assert.Zero(t, p.EarlyOps(), "b waits for the upload's stream")
}

// The plan says where it launches early: "early" after the op in the text,
// a figure line, and the pass's summary.
func TestEarlyText(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 1<<16, dag.Zeros())
	b.Launch(dag.Scale, dag.Grid1(16), dag.Grid1(256), x, 2.0, dag.Name("a"))
	b.Launch(dag.Scale, dag.Grid1(16), dag.Grid1(256), x, 2.0, dag.Name("b"))
	g, err := b.Build()
	require.NoError(t, err)
	p := mustPlan(t, g, planner.Streams(1))
	var buf bytes.Buffer
	require.NoError(t, p.WriteText(&buf))
	assert.Contains(t, buf.String(), "  launch b [scale grid 16x1x1 block 256x1x1] early\n")
	assert.NotContains(t, buf.String(), "launch a [scale grid 16x1x1 block 256x1x1] early")
	assert.Contains(t, buf.String(), "early launches      PDL on 1 edge ")
	assert.Equal(t, "PDL on 1 edge", p.Passes[len(p.Passes)-1].Summary)
}

// The verifier refuses marks the early pass would never make.
func TestVerifyEarly(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 1<<16, dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("f"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(256), x, 2.0, dag.Name("a"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(256), x, 2.0, dag.Name("b"))
	g, err := b.Build()
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		early []bool
		msg   string
	}{
		{"after a fill", []bool{false, true, false}, `op "a" launches early but follows fill op "f", not a kernel`},
		{"not a kernel", []bool{true, false, false}, `op "f" launches early but is not a kernel that waits`},
		{"entries", []bool{true}, "Early has 1 entries for 3 ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, g, planner.Streams(1))
			require.NoError(t, verify.Verify(p))
			p.Early = tc.early
			err := verify.Verify(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}
