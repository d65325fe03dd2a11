package dag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestEpilogueNames(t *testing.T) {
	for _, e := range dag.Epilogues() {
		got, ok := dag.ParseEpilogue(e.String())
		require.True(t, ok, e.String())
		assert.Equal(t, e, got)
	}
	_, ok := dag.ParseEpilogue("silu")
	assert.False(t, ok)
	assert.Equal(t, "Epilogue(9)", dag.Epilogue(9).String())
	for _, c := range []struct {
		bias bool
		act  dag.Epilogue
		want dag.Epilogue
	}{
		{false, dag.NoEpilogue, dag.NoEpilogue}, {true, dag.NoEpilogue, dag.EpiBias},
		{false, dag.EpiGelu, dag.EpiGelu}, {true, dag.EpiGelu, dag.EpiBiasGelu},
		{false, dag.EpiRelu, dag.EpiRelu}, {true, dag.EpiRelu, dag.EpiBiasRelu},
	} {
		got, ok := dag.ComposeEpilogue(c.bias, c.act)
		require.True(t, ok)
		assert.Equal(t, c.want, got)
		assert.Equal(t, c.bias, got.HasBias())
		assert.Equal(t, c.act, got.Activation())
	}
	_, ok = dag.ComposeEpilogue(true, dag.EpiBias)
	assert.False(t, ok, "a bias is no activation")
}

// A bias is the gemm's last read, whatever the order of the options, so
// that dependencies and the undefined-read check see it.
func TestGemmBiasIsARead(t *testing.T) {
	b := dag.New()
	a := b.Buffer("a", 2*3*4, dag.Zeros())
	w := b.Buffer("w", 3*4*4, dag.Zeros())
	c := b.Buffer("c", 2*4*4, dag.Zeros())
	d := b.Buffer("d", 2*4*4)
	bias := b.Buffer("bias", 4*4)
	b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(32), bias, 0.0).With(dag.Name("init"))
	sh := dag.GemmShape{M: 2, N: 4, K: 3}
	b.Gemm(c.All(), a.All(), w.All(), sh, dag.Bias(bias.All()), dag.Output(d.All()), dag.WithEpilogue(dag.EpiBiasGelu)).With(dag.Name("g"))
	b.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiRelu)).With(dag.Name("r"))
	g, err := b.Build()
	require.NoError(t, err)
	op := g.Ops[1]
	require.Equal(t, 4, op.Gemm.BiasAccess())
	assert.Equal(t, bias, op.Access[4].Buf)
	assert.Equal(t, []dag.Mode{dag.Read, dag.Read, dag.Read, dag.Write, dag.Read}, modes(op))
	assert.Equal(t, []string{"init"}, deps(g, "g"))
	assert.Equal(t, "2x4x3 +bias_gelu", op.Gemm.String())
	assert.Equal(t, -1, g.Ops[2].Gemm.BiasAccess())
	require.NoError(t, dag.CheckGemmViews(op))

	// Without its init the bias is read undefined.
	b = dag.New()
	a = b.Buffer("a", 2*3*4, dag.Zeros())
	w = b.Buffer("w", 3*4*4, dag.Zeros())
	c = b.Buffer("c", 2*4*4, dag.Zeros())
	bias = b.Buffer("bias", 4*4)
	b.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBias), dag.Bias(bias.All())).With(dag.Name("g"))
	_, err = b.Build()
	require.ErrorIs(t, err, dag.ErrUndefinedRead)
	assert.ErrorContains(t, err, "bias")
}

func TestEpilogueErrors(t *testing.T) {
	sh := dag.GemmShape{M: 4, N: 4, K: 4}
	mk := func(bd *dag.Builder, dt dag.DType) (a, w, c *dag.Buffer) {
		es := dt.Size()
		return bd.Buffer("a", 16*es, dag.Of(dt), dag.Zeros()), bd.Buffer("w", 16*es, dag.Of(dt), dag.Zeros()), bd.Buffer("c", 16*es, dag.Of(dt), dag.Zeros())
	}
	tests := []struct {
		name  string
		build func(bd *dag.Builder)
		field string
		msg   string
	}{
		{"bias missing", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBiasGelu)).With(dag.Name("g"))
		}, "bias", "gemm has 3 accesses, wants 4 (a, b, c, bias)"},
		{"bias without a bias epilogue", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			b := bd.Buffer("b", 16, dag.Zeros())
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiGelu), dag.Bias(b.All())).With(dag.Name("g"))
		}, "bias", "a bias goes with the epilogues bias, bias_gelu and bias_relu"},
		{"unknown epilogue", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.Epilogue(42))).With(dag.Name("g"))
		}, "epilogue", "unknown epilogue 42"},
		{"f64", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F64)
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiRelu)).With(dag.Name("g"))
		}, "epilogue", "epilogue relu on a gemm of f64 matrices"},
		{"bias dtype", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.BF16)
			b := bd.Buffer("b", 16, dag.Zeros())
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBias), dag.Bias(b.All())).With(dag.Name("g"))
		}, "bias", "bias b is f32 but the gemm is bf16"},
		{"bias length", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			b := bd.Buffer("b", 32, dag.Zeros())
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBias), dag.Bias(b.All())).With(dag.Name("g"))
		}, "bias", "holds 8 f32 elements, not n = 4"},
		{"bias in host memory", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			b := bd.Buffer("b", 16, dag.PinnedHost(), dag.Zeros())
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBiasRelu), dag.Bias(b.All())).With(dag.Name("g"))
		}, "bias", "pinned host memory"},
		{"bias over the output", func(bd *dag.Builder) {
			a, w, c := mk(bd, dag.F32)
			bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBias), dag.Bias(c.Slice(0, 16))).With(dag.Name("g"))
		}, "bias", "overlaps the output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bd := dag.New()
			tt.build(bd)
			_, err := bd.Build()
			require.Error(t, err)
			var found bool
			for _, e := range dag.Errors(err) {
				if e.Op == "g" && e.Field == tt.field {
					found = true
					assert.Contains(t, e.Error(), tt.msg)
				}
			}
			assert.True(t, found, "no error on field %q of op g in %v", tt.field, err)
		})
	}
}

// CheckGemmViews refuses a hand-made op whose bias does not fit, so a
// backend never reads past it.
func TestCheckGemmViewsEpilogue(t *testing.T) {
	b := dag.New()
	a := b.Buffer("a", 64, dag.Zeros())
	bias := b.Buffer("bias", 8, dag.Zeros())
	s := &dag.GemmSpec{GemmShape: dag.GemmShape{M: 4, N: 4, K: 4}, Alpha: 1, LDA: 4, LDB: 4, LDC: 4, Batch: 1,
		StrideA: 16, StrideB: 16, StrideC: 16, Epilogue: dag.EpiBias}
	op := &dag.Op{Kind: dag.Gemm, Gemm: s, Access: []dag.Access{dag.In(a.All()), dag.In(a.All()), dag.Out(a.All()), dag.In(bias.All())}}
	assert.ErrorContains(t, dag.CheckGemmViews(op), "is not 4 f32 elements")
	s.Epilogue = dag.Epilogue(77)
	assert.ErrorContains(t, dag.CheckGemmViews(op), "unknown")
	s.Epilogue = dag.EpiGelu
	assert.ErrorContains(t, dag.CheckGemmViews(op), "gemm has 4 accesses, not 3")
}
