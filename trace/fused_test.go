package trace_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// fusedPlan plans a gemm, a bias_add and a gelu, which the planner
// fuses, and a scale after them.
func fusedPlan(t *testing.T) *planner.Plan {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4*8*4, dag.Zeros())
	w := b.Buffer("w", 8*16*4, dag.Zeros())
	h := b.Buffer("h", 4*16*4, dag.Zeros())
	bias := b.Buffer("b1", 16*4, dag.Zeros())
	b.Gemm(h.All(), x.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}).With(dag.Name("fc1"))
	b.Launch(dag.BiasAdd, dag.Grid1(1), dag.Grid1(64), h, bias).With(dag.Name("bias1"))
	b.Launch(dag.Gelu, dag.Grid1(1), dag.Grid1(64), h, h).With(dag.Name("gelu"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(64), h, 2.0).With(dag.Name("scale"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

// A fused op's slices and pictures name it after its parts and list them.
func TestFusedOpsInTraces(t *testing.T) {
	p := fusedPlan(t)
	tr := trace.FromPlan(p, nil)
	require.Len(t, tr.Slices, 2)
	byName := map[string]trace.Slice{}
	for _, s := range tr.Slices {
		byName[s.Name] = s
	}
	assert.Equal(t, []string{"fc1", "bias1", "gelu"}, byName["fc1+bias1+gelu"].Parts)
	assert.Nil(t, byName["scale"].Parts)
	assert.ElementsMatch(t, []string{"b1", "w", "x"}, byName["fc1+bias1+gelu"].Reads)

	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	assert.Contains(t, buf.String(), `"parts":["fc1","bias1","gelu"]`)
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	for _, s := range back.Slices {
		if s.Name == "fc1+bias1+gelu" {
			assert.Equal(t, []string{"fc1", "bias1", "gelu"}, s.Parts)
		}
	}

	buf.Reset()
	require.NoError(t, trace.PlanSVG(&buf, p))
	assert.Contains(t, buf.String(), "fused: runs fc1, bias1, gelu as one op")
	assert.Contains(t, buf.String(), "2 ops (1 fused op of several declared ops) on 1 stream")
	buf.Reset()
	require.NoError(t, trace.PlanDOT(&buf, p))
	assert.Contains(t, buf.String(), `label="fc1+bias1+gelu\ngemm 4x16x8 +bias_gelu"`)
}

// The fused ops a backend ran apart are the trace's to say, and stay
// through a round trip.
func TestUnfusedInTraces(t *testing.T) {
	tr := trace.FromPlan(fusedPlan(t), nil)
	tr.Figures.Unfused = []string{"fc1+gelu: epilogue gelu run as builtin kernels after the gemm: no algorithm"}
	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	assert.Equal(t, tr.Figures.Unfused, back.Figures.Unfused)
	buf.Reset()
	require.NoError(t, back.WriteSummary(&buf))
	assert.Contains(t, buf.String(), "\nunfused               fc1+gelu: epilogue gelu run as builtin kernels after the gemm: no algorithm\n")
}
