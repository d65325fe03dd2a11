package verify_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// fusedPlan plans a gemm, a bias_add and a gelu on its output, which the
// planner fuses, then a copy that reads the result.
func fusedPlan(t *testing.T) *planner.Plan {
	t.Helper()
	b := dag.New()
	bf := dag.Of(dag.BF16)
	x := b.Buffer("x", 4*8*2, bf, dag.Zeros())
	w := b.Buffer("w", 8*16*2, bf, dag.Zeros())
	h := b.Buffer("h", 4*16*2, bf, dag.Zeros())
	bias := b.Buffer("bias", 16*2, bf, dag.Zeros())
	out := b.Buffer("out", 4*16*2, bf, dag.Zeros())
	b.Gemm(h.All(), x.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}).With(dag.Name("fc1"))
	b.Launch(dag.BiasAdd, dag.Grid1(1), dag.Grid1(64), h, bias).With(dag.Name("bias1"))
	b.Launch(dag.Gelu, dag.Grid1(1), dag.Grid1(64), h, h).With(dag.Name("gelu"))
	b.Copy(out.All(), h.All()).With(dag.Name("keep"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	require.Equal(t, [][]int32{{0, 1, 2}, {3}}, p.Parts)
	return p
}

// A fused plan is checked against the graph as declared: its parts, the
// bytes its fused ops use, and the order of the declared ops it runs.
func TestVerifyFusedPlans(t *testing.T) {
	require.NoError(t, verify.Verify(fusedPlan(t)))

	cases := []struct {
		name  string
		spoil func(p *planner.Plan)
		kind  verify.Kind
		msg   string
	}{
		{"a part left out", func(p *planner.Plan) { p.Parts[0] = []int32{0, 1} }, verify.OpMissing,
			`declared op "gelu" is part of no op of the plan`},
		{"a part twice", func(p *planner.Plan) { p.Parts[1] = []int32{2, 3} }, verify.OpTwice,
			`declared op "gelu" is part of two ops of the plan`},
		{"parts for too few ops", func(p *planner.Plan) { p.Parts = p.Parts[:1] }, verify.Malformed,
			"parts for 1 ops of a graph of 2"},
		{"a part out of range", func(p *planner.Plan) { p.Parts[1] = []int32{3, 9} }, verify.Malformed,
			"runs declared op 9 of 4"},
		{"parts in the wrong order", func(p *planner.Plan) { p.Parts[0] = []int32{2, 1, 0} }, verify.UnorderedConflict,
			"against the graph as declared: "},
		{"the bias not read", func(p *planner.Plan) {
			op := *p.Graph.Ops[0]
			op.Access = op.Access[:3]
			p.Graph.Ops[0] = &op
		}, verify.Malformed, `op "fc1+bias1+gelu" (which runs fc1, bias1, gelu) does not use bias, which "bias1" reads`},
		{"more written than declared", func(p *planner.Plan) {
			op := *p.Graph.Ops[0]
			op.Access = slices.Clone(op.Access)
			op.Access[0].Mode = dag.ReadWrite
			p.Graph.Ops[0] = &op
		}, verify.Malformed, "reads and writes x, which its parts do not write"},
		{"the copy run with the gemm", func(p *planner.Plan) {
			p.Parts = [][]int32{{0, 1, 3}, {2}}
		}, verify.Malformed, `does not use out, which "keep" writes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fusedPlan(t)
			c.spoil(p)
			err := verify.Verify(p)
			ve, ok := err.(*verify.Error)
			require.True(t, ok, "%v", err)
			assert.Equal(t, c.kind, ve.Kind, "%v", err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

// The same graph fused but placed so that another stream reads the
// gemm's output between its parts is refused: the parts run as one.
func TestVerifyFusedAgainstAnInterveningReader(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4*8*4, dag.Zeros())
	w := b.Buffer("w", 8*16*4, dag.Zeros())
	h := b.Buffer("h", 4*16*4, dag.Zeros())
	o := b.Buffer("o", 4*16*4, dag.Zeros())
	b.Gemm(h.All(), x.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}).With(dag.Name("fc1"))
	b.Copy(o.All(), h.All()).With(dag.Name("peek"))
	b.Launch(dag.Relu, dag.Grid1(1), dag.Grid1(64), h, h).With(dag.Name("act"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Fuse(planner.FuseNone))
	require.NoError(t, err)
	// A hand-made fusion of fc1 and act around peek: the fused gemm runs
	// relu before peek reads h, which the declared graph forbids.
	fused := *g.Ops[0]
	spec := *fused.Gemm
	spec.Epilogue = dag.EpiRelu
	fused.Gemm, fused.Name = &spec, "fc1+act"
	peek := *g.Ops[1]
	peek.ID, peek.Index, peek.Deps = 1, 1, []int32{0}
	fg := &dag.Graph{Buffers: g.Buffers, Kernels: g.Kernels, Ops: []*dag.Op{&fused, &peek}}
	q := &planner.Plan{Graph: fg, Streams: p.Streams, OpStream: []int32{0, 0}, Events: 0,
		Steps: []planner.Step{
			{Kind: planner.Run, Stream: 0, Op: 0, Event: -1},
			{Kind: planner.Run, Stream: 0, Op: 1, Event: -1},
		},
		Declared: g, Parts: [][]int32{{0, 2}, {1}}}
	q.OpStream = []int32{0, 0}
	q.Streams = q.Streams[:1]
	err = verify.Verify(q)
	ve, ok := err.(*verify.Error)
	require.True(t, ok, "%v", err)
	assert.Equal(t, verify.UnorderedConflict, ve.Kind)
	assert.Contains(t, err.Error(), `against the graph as declared: op "peek" (dev0.normal.compute0) reads h[0:256) and op "act"`)
}
