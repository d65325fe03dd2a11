package planner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// fuseBufs are the buffers of a small MLP layer: x (4 x 8) times w
// (8 x 16) into h (4 x 16), a bias of 16 elements.
type fuseBufs struct{ x, w, h, bias, other *dag.Buffer }

func fuseGraph(t *testing.T, dt dag.DType, declare func(b *dag.Builder, f fuseBufs)) *dag.Graph {
	t.Helper()
	return build(t, func(b *dag.Builder) {
		es := dt.Size()
		f := fuseBufs{
			x:     b.Buffer("x", 4*8*es, dag.Of(dt), dag.Zeros()),
			w:     b.Buffer("w", 8*16*es, dag.Of(dt), dag.Zeros()),
			h:     b.Buffer("h", 4*16*es, dag.Of(dt), dag.Zeros()),
			bias:  b.Buffer("b", 16*es, dag.Of(dt), dag.Zeros()),
			other: b.Buffer("o", 4*16*es, dag.Of(dt), dag.Zeros()),
		}
		declare(b, f)
	})
}

var (
	g1   = dag.Grid1(1)
	b256 = dag.Grid1(256)
	mlp  = dag.GemmShape{M: 4, N: 16, K: 8}
)

func gemm(b *dag.Builder, f fuseBufs, opts ...dag.OpOption) *dag.Op {
	return b.Gemm(f.h.All(), f.x.All(), f.w.All(), mlp, opts...).With(dag.Name("fc1"))
}

// The fuse pass makes a gemm and the launches that finish its output one
// gemm with an epilogue, and leaves them apart where that would change
// what the graph computes.
func TestFusePass(t *testing.T) {
	cases := []struct {
		name    string
		dt      dag.DType
		declare func(b *dag.Builder, f fuseBufs)
		fused   []string     // the names of the plan's ops that are fused
		epi     dag.Epilogue // the first fused op's epilogue
		why     string       // what the fuse pass's summary says
	}{
		{"gelu in place", dag.BF16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, []string{"fc1+act"}, dag.EpiGelu, "1 gemm fused with 1 launch"},
		{"bias then gelu", dag.F16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias).With(dag.Name("bias1"))
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("gelu"))
		}, []string{"fc1+bias1+gelu"}, dag.EpiBiasGelu, "1 gemm fused with 2 launches"},
		{"bias then relu", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias).With(dag.Name("bias1"))
			b.Launch(dag.Relu, g1, b256, f.h, f.h).With(dag.Name("relu"))
		}, []string{"fc1+bias1+relu"}, dag.EpiBiasRelu, ""},
		{"bias alone", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias).With(dag.Name("bias1"))
			b.Launch(dag.Scale, g1, b256, f.h, 2.0).With(dag.Name("scale"))
		}, []string{"fc1+bias1"}, dag.EpiBias, ""},
		{"relu after a gemm's own bias", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f, dag.WithEpilogue(dag.EpiBias), dag.Bias(f.bias.All()))
			b.Launch(dag.Relu, g1, b256, f.h, f.h).With(dag.Name("relu"))
		}, []string{"fc1+relu"}, dag.EpiBiasRelu, ""},
		{"unrelated ops in between", dag.BF16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Fill(f.other.All(), 1).With(dag.Name("fill"))
			b.Copy(f.x.All(), f.other.Slice(0, f.x.Size)).With(dag.Name("overwrite_x")) // after fc1 read x: follows it
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, []string{"fc1+act"}, dag.EpiGelu, ""},

		{"another reader first", dag.BF16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Copy(f.other.All(), f.h.All()).With(dag.Name("peek"))
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, nil, 0, "nothing fused"},
		{"another reader of part of it", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Scale, g1, b256, f.other, 2.0).With(dag.Name("unrelated"))
			b.Launch(dag.Relu, g1, b256, f.other.Slice(0, 16), f.h.Slice(48, 16)).With(dag.Name("peek"))
			b.Launch(dag.Relu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, nil, 0, "nothing fused"},
		{"out of place", dag.BF16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Gelu, g1, b256, f.other, f.h).With(dag.Name("act"))
		}, nil, 0, "act not fused: it writes o, not fc1's output h"},
		{"part of the view", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Gelu, g1, b256, f.h.Slice(0, 128), f.h.Slice(0, 128)).With(dag.Name("act"))
		}, nil, 0, "act not fused: it writes h[0:128], not fc1's output h"},
		{"rows with gaps", dag.F32, func(b *dag.Builder, f fuseBufs) {
			b.Gemm(f.h.All(), f.x.All(), f.w.All(), dag.GemmShape{M: 4, N: 8, K: 8}, dag.LeadingDims(0, 16, 16)).With(dag.Name("fc1"))
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, nil, 0, "nothing fused"},
		{"a second activation", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f, dag.WithEpilogue(dag.EpiGelu))
			b.Launch(dag.Relu, g1, b256, f.h, f.h).With(dag.Name("act"))
		}, nil, 0, "act not fused: fc1 already applies gelu"},
		{"a bias after the activation", dag.F16, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Relu, g1, b256, f.h, f.h).With(dag.Name("act"))
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias).With(dag.Name("late"))
		}, []string{"fc1+act"}, dag.EpiRelu, "late not fused: fc1 already applies relu, and a bias goes first"},
		{"a bias shorter than a row", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias.Slice(0, 32)).With(dag.Name("bias1"))
		}, nil, 0, "bias1 not fused: its b holds 8 elements, not one per column of fc1 (16)"},
		{"the bias written in between", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Fill(f.bias.All(), 0.5).With(dag.Name("set_bias"))
			b.Launch(dag.BiasAdd, g1, b256, f.h, f.bias).With(dag.Name("bias1"))
		}, nil, 0, "bias1 not fused: it follows set_bias, declared after fc1"},
		{"another priority", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Gelu, g1, b256, f.h, f.h).With(dag.Name("act")).With(dag.High)
		}, nil, 0, "act not fused: its priority high is not fc1's normal"},
		{"softmax", dag.F32, func(b *dag.Builder, f fuseBufs) {
			gemm(b, f)
			b.Launch(dag.Softmax, g1, b256, f.h, f.h, 16).With(dag.Name("sm"))
		}, nil, 0, "nothing fused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := fuseGraph(t, c.dt, c.declare)
			p := mustPlan(t, g, planner.Verify())
			require.NoError(t, verify.Verify(p))
			require.Equal(t, "fuse", p.Passes[0].Name)
			if c.why != "" {
				assert.Contains(t, p.Passes[0].Summary, c.why)
			}
			var fused []string
			for _, id := range p.Fused() {
				fused = append(fused, p.Graph.Ops[id].Name)
			}
			assert.Equal(t, c.fused, fused)
			if len(c.fused) == 0 {
				assert.Nil(t, p.Declared)
				assert.Same(t, g, p.Graph)
				return
			}
			assert.Same(t, g, p.Declared)
			op := p.Graph.Ops[p.Fused()[0]]
			require.Equal(t, dag.Gemm, op.Kind)
			assert.Equal(t, c.epi, op.Gemm.Epilogue)
			require.NoError(t, dag.CheckGemmViews(op))
			if c.epi.HasBias() {
				assert.Equal(t, "b", op.Access[op.Gemm.BiasAccess()].Buf.Name)
			}
			assert.Equal(t, len(g.Ops)-len(p.Graph.Ops)+1, len(p.PartsOf(p.Fused()[0])))
			assert.Equal(t, "fc1", g.Ops[0].Name, "the declared graph is left as it was")
			assert.NotEqual(t, c.epi, g.Ops[0].Gemm.Epilogue, "the declared gemm keeps its own epilogue")

			none := mustPlan(t, g, planner.Verify(), planner.Fuse(planner.FuseNone))
			assert.Same(t, g, none.Graph)
			assert.Empty(t, none.Fused())
		})
	}
}

// The ops after a fused op depend on it, and a chain of chunks fuses
// chunk by chunk.
func TestFusedDependencies(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		bf := dag.Of(dag.BF16)
		x := b.Buffer("x", 4*8*2, bf, dag.Zeros())
		w := b.Buffer("w", 8*16*2, bf, dag.Zeros())
		y := b.Buffer("y", 4*8*2, bf, dag.Zeros())
		for c := range 2 {
			h := b.Buffer(fmt.Sprint("h", c), 4*16*2, bf, dag.Zeros())
			b.Gemm(h.All(), x.All(), w.All(), mlp).With(dag.Name(fmt.Sprint("fc1_", c)))
			b.Launch(dag.Gelu, g1, b256, h, h).With(dag.Name(fmt.Sprint("gelu", c)))
			b.Gemm(y.All(), h.All(), w.All(), dag.GemmShape{M: 4, N: 8, K: 16}, dag.TransB(), dag.Beta(1)).With(dag.Name(fmt.Sprint("fc2_", c)))
		}
	})
	p := mustPlan(t, g, planner.Verify())
	var names []string
	for _, op := range p.Graph.Ops {
		names = append(names, op.Name)
		assert.Equal(t, op.ID, op.Index)
	}
	assert.Equal(t, []string{"fc1_0+gelu0", "fc2_0", "fc1_1+gelu1", "fc2_1"}, names)
	assert.Equal(t, []int32{0}, p.Graph.Ops[1].Deps, "fc2_0 reads what gelu0 wrote")
	assert.Equal(t, []int32{1, 2}, p.Graph.Ops[3].Deps)
	assert.Equal(t, [][]int32{{0, 1}, {2}, {3, 4}, {5}}, p.Parts)
	assert.Equal(t, "gemm fc1_1 and gelu gelu1, one gemm with epilogue gelu", p.FusedText(2))

	var buf strings.Builder
	require.NoError(t, p.WriteText(&buf))
	assert.Contains(t, buf.String(), "  gemm fc1_0+gelu0 [4x16x8 +gelu]\n")
	assert.Contains(t, buf.String(), "fused               2 ops run 4 declared ops\n  fc1_0+gelu0: gemm fc1_0 and gelu gelu0, one gemm with epilogue gelu\n")
	data, err := p.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"fused":[{"op":"fc1_0+gelu0","parts":["fc1_0","gelu0"],"epilogue":"gelu"},{"op":"fc1_1+gelu1","parts":["fc1_1","gelu1"],"epilogue":"gelu"}]`)
}

// A graph with a loop keeps its ops: the ops of bodies are numbered
// after the graph's.
func TestFuseLeavesLoops(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 4*8*4, dag.Zeros())
		w := b.Buffer("w", 8*16*4, dag.Zeros())
		h := b.Buffer("h", 4*16*4, dag.Zeros())
		flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
		b.Gemm(h.All(), x.All(), w.All(), mlp).With(dag.Name("fc1"))
		b.Launch(dag.Gelu, g1, b256, h, h).With(dag.Name("act"))
		b.While(flag.All(), func(b *dag.Builder) { b.Launch(dag.Scale, g1, b256, h, 0.5) })
	})
	p := mustPlan(t, g, planner.Verify())
	assert.Same(t, g, p.Graph)
	assert.Equal(t, "nothing fused: the graph has loops or branches", p.Passes[0].Summary)
}

func TestParseFusion(t *testing.T) {
	for _, f := range []planner.Fusion{planner.FuseAuto, planner.FuseNone} {
		got, err := planner.ParseFusion(f.String())
		require.NoError(t, err)
		assert.Equal(t, f, got)
		text, err := f.MarshalText()
		require.NoError(t, err)
		var back planner.Fusion
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, f, back)
	}
	_, err := planner.Fusion(7).MarshalText()
	assert.EqualError(t, err, "unknown fusion 7")
	var f planner.Fusion
	assert.EqualError(t, f.UnmarshalText([]byte("all")), `unknown fusion "all": use auto or none`)
	_, err = planner.ParseFusion("all")
	assert.EqualError(t, err, `unknown fusion "all": use auto or none`)
	_, err = planner.New(build(t, func(b *dag.Builder) { b.Fill(b.Buffer("x", 4).All(), 1) }), planner.Fuse(7))
	assert.ErrorContains(t, err, "unknown fusion 7")
}
