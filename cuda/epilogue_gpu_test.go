//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// epilogueCase is one GEMM with an epilogue: its dtype, its epilogue, and
// how its bias and output are laid out.
type epilogueCase struct {
	dt       dag.DType
	epi      dag.Epilogue
	layout   string // "plain", "batched residual" (beta 1, d, batch 2) or "temporary bias"
	biasSkew int64  // bytes the bias view starts into its buffer: below 16, cuBLASLt is not asked (epilogueRefusal)
}

func (c epilogueCase) String() string {
	s := fmt.Sprintf("%s/%s/%s", c.dt, c.epi, c.layout)
	if c.biasSkew != 0 {
		s += fmt.Sprintf("/bias+%dB", c.biasSkew)
	}
	return s
}

// epilogueGraph declares c: a 64 x 96 x 128 product (per matrix of the
// batch) with random operands scaled to keep the result near 1, and a
// bias that runs through the activations' interesting range.
func epilogueGraph(t testing.TB, c epilogueCase) *dag.Graph {
	const m, n, k = 64, 96, 128
	batch := int64(1)
	if c.layout == "batched residual" {
		batch = 2
	}
	bd := dag.New()
	dev, of := dag.OnDevice(0), dag.Of(c.dt)
	es := c.dt.Size()
	a := bd.Buffer("a", batch*m*k*es, dev, of, dag.Random(1))
	b := bd.Buffer("b", batch*k*n*es, dev, of, dag.Random(2))
	cb := bd.Buffer("c", batch*m*n*es, dev, of, dag.Random(3))
	opts := []dag.OpOption{dag.Alpha(2.0 / k), dag.Batched(batch, 0, 0, 0), dag.WithEpilogue(c.epi)}
	if c.layout == "batched residual" {
		d := bd.Buffer("d", cb.Size, dev, of, dag.Value(5))
		opts = append(opts, dag.Beta(1), dag.Output(d.All()))
	}
	var bias *dag.Buffer
	if c.epi.HasBias() {
		size := n*es + c.biasSkew
		view := func() dag.View { return bias.Slice(c.biasSkew, n*es) }
		if c.layout == "temporary bias" {
			// Made on the device each run: its address is the pool's.
			bias = bd.Buffer("bias", size, dev, of, dag.Temporary())
			bd.Alloc(bias)
			bd.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(128), view(), -48.0)
			bd.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(128), view(), 1.0/32)
		} else {
			// From -1.5 to 1.5 over the columns: relu cuts, gelu bends.
			data := make([]byte, size)
			for j := range int64(n) {
				copy(data[c.biasSkew+j*es:], dag.ElemBytes(c.dt, -1.5+3*float64(j)/n))
			}
			bias = bd.Buffer("bias", size, dev, of, dag.Contents(data))
		}
		opts = append(opts, dag.Bias(view()))
	}
	bd.Gemm(cb.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k}, opts...).With(dag.Name("mm"))
	if c.layout == "temporary bias" {
		bd.Free(bias)
	}
	g, err := bd.Build()
	require.NoError(t, err)
	return g
}

// epilogueTolerance bounds |gpu - cpu| for a result whose exact
// pre-activation value has magnitude sum mag: both accumulate in f32 (in
// different orders) and apply the epilogue in f32, the activations'
// slopes are below 1.2, and both round the result to the dtype once,
// possibly to neighbours. cuBLASLt's GELU may take its tanh from the
// hardware's approximation (2^-10.7 relative): 0.5 |x| of that.
func epilogueTolerance(dt dag.DType, epi dag.Epilogue, want, mag float64) float64 {
	tol := 1.2*gemmTolerance(dt, false, want, mag) + 1e-6*math.Abs(want) + 1e-7
	if epi.Activation() == dag.EpiGelu {
		tol += 4e-4 * mag
	}
	return tol
}

// skipNoCuBLASLt skips the test where err says no cuBLASLt library could
// be loaded (ErrNoCuBLASLt), unless DAGRUN_REQUIRE_GPU=1. Only that error:
// any other, cuBLASLt's own statuses included, fails the test.
func skipNoCuBLASLt(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
		t.Skipf("no cuBLASLt: %v", err)
	}
}

// runEpilogue runs g on the cpu backend and on b, eagerly and replayed
// from a captured graph, and returns the cpu's results, the gpu's, and
// what the gpu session ran unfused.
func runEpilogue(t *testing.T, b *Backend, g *dag.Graph) (want, eager, replayed map[*dag.Buffer][]byte, unfused []string) {
	t.Helper()
	p, err := planner.New(g, planner.Verify())
	require.NoError(t, err)
	want, err = executor.Execute(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	ctx := context.Background()
	sess, err := executor.Open(ctx, b, p)
	skipNoCuBLASLt(t, err)
	require.NoError(t, err)
	defer func() { require.NoError(t, sess.Close()) }()
	for _, u := range sess.Unfused() {
		unfused = append(unfused, u.Op+": "+u.Why)
	}
	read := func() map[*dag.Buffer][]byte {
		out := map[*dag.Buffer][]byte{}
		for _, buf := range g.Buffers {
			if !buf.Temporary {
				data, err := sess.Read(buf)
				require.NoError(t, err)
				out[buf] = data
			}
		}
		return out
	}
	require.NoError(t, sess.Run(ctx))
	eager = read()
	cg, err := sess.Capture(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, cg.Close()) }()
	require.NoError(t, cg.Run(ctx))
	replayed = read()
	return want, eager, replayed, unfused
}

// compareEpilogue checks the gpu's output of g's gemm against the cpu's.
// Unfused, the gpu rounds the product to dt before the builtin kernels
// add the bias and apply the activation: up to half a step of the
// product's magnitude more than the one rounding the cpu models, which
// cancellation by the bias can make many steps of the result.
func compareEpilogue(t *testing.T, g *dag.Graph, dt dag.DType, got, want map[*dag.Buffer][]byte, unfused bool, what string) {
	t.Helper()
	op := g.Ops[len(g.Ops)-1]
	for _, o := range g.Ops {
		if o.Kind == dag.Gemm {
			op = o
		}
	}
	s := op.Gemm
	out := op.Access[s.OutAccess()].Buf
	cIn := op.Access[dag.GemmC].Buf
	mag := gemmMagnitudes(s, dt, want[op.Access[dag.GemmA].Buf], want[op.Access[dag.GemmB].Buf], cIn.InitialBytes())
	var bias []byte
	if bi := s.BiasAccess(); bi >= 0 && !op.Access[bi].Buf.Temporary {
		v := op.Access[bi].View
		bias = want[v.Buf][v.Offset:v.End()]
	}
	es := dt.Size()
	bad := 0
	for e, m := range mag {
		if bias != nil {
			m += math.Abs(dag.ElemValue(bias[(e%s.N)*es:], dt))
		} else if s.Epilogue.HasBias() {
			m += 2 // the temporary bias holds values in [-1.5, 1.5)
		}
		w := dag.ElemValue(want[out][e*es:], dt)
		x := dag.ElemValue(got[out][e*es:], dt)
		tol := epilogueTolerance(dt, s.Epilogue, w, m)
		if unfused {
			tol += 1.2 * productRounding(dt) * m
		}
		if math.Abs(w-x) > tol || math.IsNaN(x) != math.IsNaN(w) {
			if bad++; bad <= 5 {
				t.Errorf("%s: element %d: gpu %g, cpu %g, tolerance %g", what, e, x, w, tol)
			}
		}
	}
	assert.Zero(t, bad, "%s: elements out of tolerance", what)
}

// TestGemmEpiloguesAgainstCPUGPU runs every epilogue on every dtype it
// takes, with a persistent bias, a temporary one (its address set at each
// run) and a batch writing to d over a residual, eagerly and replayed,
// and compares each with the cpu backend.
func TestGemmEpiloguesAgainstCPUGPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, epi := range dag.Epilogues()[1:] {
			for _, layout := range []string{"plain", "batched residual", "temporary bias"} {
				c := epilogueCase{dt: dt, epi: epi, layout: layout}
				if layout == "temporary bias" && !epi.HasBias() {
					continue
				}
				t.Run(c.String(), func(t *testing.T) {
					g := epilogueGraph(t, c)
					want, eager, replayed, unfused := runEpilogue(t, b, g)
					if len(unfused) > 0 {
						t.Logf("ran unfused: %v", unfused)
					}
					compareEpilogue(t, g, dt, eager, want, len(unfused) > 0, "eager")
					compareEpilogue(t, g, dt, replayed, want, len(unfused) > 0, "replayed")
				})
			}
		}
	}
}

// productRounding is the relative error of rounding a product to dt (half
// a step): what an unfused epilogue adds.
func productRounding(dt dag.DType) float64 {
	switch dt {
	case dag.F16:
		return 0x1p-11
	case dag.BF16:
		return 0x1p-8
	}
	return 0x1p-24
}

// TestGemmEpiloguesFusedGPU: cuBLASLt takes every epilogue on aligned
// shapes of every dtype, so none runs as builtin kernels; the MLP block's
// speed rests on bias_gelu and gelu in bf16.
func TestGemmEpiloguesFusedGPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, epi := range dag.Epilogues()[1:] {
			c := epilogueCase{dt: dt, epi: epi, layout: "plain"}
			t.Run(c.String(), func(t *testing.T) {
				g := epilogueGraph(t, c)
				p, err := planner.New(g)
				require.NoError(t, err)
				sess, err := executor.Open(context.Background(), b, p)
				skipNoCuBLASLt(t, err)
				require.NoError(t, err)
				defer func() { require.NoError(t, sess.Close()) }()
				assert.Empty(t, sess.Unfused(), "cuBLASLt refused the epilogue")
			})
		}
	}
}

// TestGemmEpilogueFallbackGPU: a bias not aligned to 16 bytes is not
// handed to cuBLASLt; the product runs without the epilogue and the
// builtin kernels apply it after, which the session reports, and the
// results match the cpu backend's all the same.
func TestGemmEpilogueFallbackGPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, epi := range []dag.Epilogue{dag.EpiBias, dag.EpiBiasGelu, dag.EpiBiasRelu} {
			for _, layout := range []string{"plain", "batched residual", "temporary bias"} {
				c := epilogueCase{dt: dt, epi: epi, layout: layout, biasSkew: dt.Size()}
				t.Run(c.String(), func(t *testing.T) {
					g := epilogueGraph(t, c)
					want, eager, replayed, unfused := runEpilogue(t, b, g)
					require.Len(t, unfused, 1)
					assert.Contains(t, unfused[0], "mm: the bias bias")
					assert.Contains(t, unfused[0], "below the 16 dagrun hands cuBLASLt")
					compareEpilogue(t, g, dt, eager, want, true, "eager")
					compareEpilogue(t, g, dt, replayed, want, true, "replayed")
				})
			}
		}
	}
	// An output with gaps between its rows cannot take the builtin
	// kernels: Open says so.
	bd := dag.New()
	dev := dag.OnDevice(0)
	a := bd.Buffer("a", 4*8*4, dev, dag.Random(1))
	w := bd.Buffer("w", 8*16*4, dev, dag.Random(2))
	c := bd.Buffer("c", 4*32*4, dev, dag.Zeros())
	bias := bd.Buffer("bias", 17*4, dev, dag.Random(3))
	bd.Gemm(c.All(), a.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}, dag.LeadingDims(0, 0, 32),
		dag.WithEpilogue(dag.EpiBiasRelu), dag.Bias(bias.Slice(4, 64))).With(dag.Name("gappy"))
	g, err := bd.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	_, err = executor.Open(context.Background(), b, p)
	skipNoCuBLASLt(t, err)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the builtin kernels cannot skip the gaps of an output with ldc 32")
}

// TestFusedMLPGPU runs examples/mlp_stream_small.yaml as the planner
// fuses it (each chunk's first GEMM takes its gelu as an epilogue) and as
// declared (--fuse none), on the GPU eagerly and replayed, against the
// cpu backend planned the same way: within two bf16 steps.
func TestFusedMLPGPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	s, err := spec.Load("../examples/mlp_stream_small.yaml")
	require.NoError(t, err)
	for _, fuse := range []planner.Fusion{planner.FuseAuto, planner.FuseNone} {
		t.Run(fuse.String(), func(t *testing.T) {
			p, err := planner.New(s.Graph, planner.Streams(s.Run.Streams), planner.Fuse(fuse), planner.Verify())
			require.NoError(t, err)
			if fuse == planner.FuseAuto {
				require.Len(t, p.Fused(), 8)
			}
			want, err := executor.Execute(context.Background(), cpu.New(), p)
			require.NoError(t, err)
			ctx := context.Background()
			sess, err := executor.Open(ctx, b, p)
			skipNoCuBLASLt(t, err)
			require.NoError(t, err)
			defer func() { require.NoError(t, sess.Close()) }()
			assert.Empty(t, sess.Unfused())
			check := func(what string) {
				for _, buf := range s.Graph.Buffers {
					if buf.Name != "h_y" {
						continue
					}
					got, err := sess.Read(buf)
					require.NoError(t, err)
					bad := 0
					for i := 0; i+2 <= len(got); i += 2 {
						x, w := dag.ElemValue(got[i:], dag.BF16), dag.ElemValue(want[buf][i:], dag.BF16)
						if math.Abs(x-w) > 2*0x1p-7*math.Max(math.Abs(w), 0x1p-4) {
							if bad++; bad <= 5 {
								t.Errorf("%s: h_y[%d] gpu %g, cpu %g", what, i/2, x, w)
							}
						}
					}
					assert.Zero(t, bad, what)
				}
			}
			require.NoError(t, sess.Run(ctx))
			check("eager")
			cg, err := sess.Capture(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, cg.Close()) }()
			require.NoError(t, cg.Run(ctx))
			check("replayed")
		})
	}
}
