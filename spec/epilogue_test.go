package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

const epilogueBuffers = `buffers:
  a: {dtype: f32, count: 6, init: {value: 1}}
  b: {dtype: f32, count: 12, init: {value: 1}}
  c: {dtype: f32, count: 8, init: zeros}
  b1: {dtype: f32, count: 4, init: {value: 0.5}}
  h1: {dtype: bf16, count: 4, init: zeros}
`

func TestGemmEpilogueKeys(t *testing.T) {
	for _, c := range []struct {
		keys string
		want dag.Epilogue
		bias bool
	}{
		{"epilogue: bias_gelu, bias: b1", dag.EpiBiasGelu, true},
		{"epilogue: bias, bias: \"b1[0:16]\"", dag.EpiBias, true},
		{"epilogue: bias_relu, bias: b1", dag.EpiBiasRelu, true},
		{"epilogue: gelu", dag.EpiGelu, false},
		{"epilogue: relu", dag.EpiRelu, false},
		{"epilogue: none", dag.NoEpilogue, false},
	} {
		t.Run(c.want.String(), func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(epilogueBuffers+"ops:\n  - gemm: {a: a, b: b, c: c, m: 2, n: 4, k: 3, "+c.keys+"}\n"))
			require.NoError(t, err)
			op := s.Graph.Ops[0]
			assert.Equal(t, c.want, op.Gemm.Epilogue)
			if c.bias {
				require.Len(t, op.Access, 4)
				assert.Equal(t, "b1", op.Access[op.Gemm.BiasAccess()].Buf.Name)
				assert.Equal(t, dag.Read, op.Access[3].Mode)
			} else {
				assert.Len(t, op.Access, 3)
			}
		})
	}
}

func TestGemmEpilogueErrors(t *testing.T) {
	cases := []struct{ name, op, want string }{
		{"unknown", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: silu}",
			`8:58: ops[0] gemm epilogue "silu" is not valid (use one of none, bias, gelu, relu, bias_gelu, bias_relu)`},
		{"near miss", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias_gleu, bias: b1}",
			`8:58: ops[0] gemm epilogue "bias_gleu" is not valid (did you mean "bias_gelu"?)`},
		{"no bias", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias_relu}",
			"8:58: ops[0] gemm epilogue bias_relu needs a bias (name the vector it adds: bias: VIEW (n elements of the gemm's dtype))"},
		{"bias without one", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: gelu, bias: b1}",
			"8:70: ops[0]: gemm has 4 accesses, wants 3 (a, b, c) (a bias goes with the epilogues bias, bias_gelu and bias_relu)"},
		{"bias alone", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, bias: b1}",
			"8:54: ops[0]: gemm has 4 accesses, wants 3 (a, b, c) (a bias goes with the epilogues bias, bias_gelu and bias_relu)"},
		{"bias length", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias, bias: \"b1[0:8]\"}",
			"8:70: ops[0]: bias view b1[0:8] holds 2 f32 elements, not n = 4 (give one f32 element per column of the output: 4)"},
		{"bias dtype", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias_gelu, bias: h1}",
			"8:75: ops[0]: bias h1 is bf16 but the gemm is f32 (give the bias the gemm's dtype, f32)"},
		{"bias unknown buffer", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias, bias: b2}",
			`8:70: ops[0] gemm bias names unknown buffer "b2" (did you mean "b1"?)`},
		{"epilogue type", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: [gelu]}",
			"8:58: ops[0] gemm epilogue must be a string, not a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, []string{c.want}, errLines(t, epilogueBuffers+"ops:\n  - gemm: "+c.op+"\n"))
		})
	}
	// An epilogue on an f64 gemm lands on the epilogue key.
	assert.Equal(t, []string{"4:82: ops[0]: epilogue relu on a gemm of f64 matrices (epilogues apply to f32, f16 and bf16 GEMMs)"},
		errLines(t, "buffers:\n  x: {dtype: f64, count: 12, init: zeros}\nops:\n  - gemm: {a: \"x[0:8]\", b: \"x[8:16]\", c: \"x[16:24]\", m: 1, n: 1, k: 1, epilogue: relu}\n"))
}
