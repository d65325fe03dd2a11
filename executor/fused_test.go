package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// A plan whose gemm took its gelu as an epilogue still takes the ops of
// the graph as declared: SetArg of a launch after the fused op reaches
// the plan's copy of it, and a fault injected into the gelu fails the
// fused op under the gelu's name.
func TestDeclaredOpsOfAFusedPlan(t *testing.T) {
	ctx := context.Background()
	b := dag.New()
	x := b.Buffer("x", 4*8*4, dag.Value(1))
	w := b.Buffer("w", 8*16*4, dag.Value(0.125))
	h := b.Buffer("h", 4*16*4, dag.Zeros())
	b.Gemm(h.All(), x.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}).With(dag.Name("fc1"))
	b.Launch(dag.Relu, dag.Grid1(1), dag.Grid1(64), h, h).With(dag.Name("act"))
	scale := b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(64), h, 2.0).With(dag.Name("scale"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	require.Len(t, p.Fused(), 1)
	assert.Same(t, p.Graph.Ops[0], p.Running(g.Ops[1]), "act runs in fc1+act")
	assert.Equal(t, "scale", p.Running(scale).Name)
	assert.NotSame(t, scale, p.Running(scale), "renumbered: a copy")

	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	cg, err := s.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, cg.Update(ctx, executor.SetArg(scale, "alpha", 3)))
	require.NoError(t, cg.Run(ctx))
	got, err := s.Read(h)
	require.NoError(t, err)
	assert.Equal(t, float32(3), f32s(got)[0], "relu(8 x 1 x 0.125) x 3")

	fs, err := executor.Open(ctx, cpu.New(), p, executor.WithFailOp("act"))
	require.NoError(t, err)
	defer fs.Close()
	err = fs.Run(ctx)
	var oe *dag.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "act", oe.Op)
	assert.ErrorIs(t, err, executor.ErrInjected)
}
