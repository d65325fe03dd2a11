//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

func TestCuBLASLtCandidates(t *testing.T) {
	dir := t.TempDir()
	c := cublasLtCandidates(dir)
	assert.Equal(t, filepath.Join(dir, "libcublasLt.so.13"), c[0], "a folder is searched first")
	assert.Equal(t, "/opt/lib/libcublasLt.so.13.1", cublasLtCandidates("/opt/lib/libcublasLt.so.13.1")[0])
	assert.Contains(t, c, "libcublasLt.so.13", "the loader's search path")
	assert.Contains(t, c, "/usr/local/cuda/lib64/libcublasLt.so.13")
	assert.Contains(t, c, "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13")
}

func TestNoCuBLASLt(t *testing.T) {
	_, err := openCuBLASLt([]string{filepath.Join(t.TempDir(), "libcublasLt.so.13")})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoCuBLASLt)
	assert.Contains(t, err.Error(), "libcublasLt.so.13")
	assert.Contains(t, err.Error(), "DAGRUN_CUBLASLT")
}

func TestCuBLASLtVersionCheck(t *testing.T) {
	for _, tt := range []struct {
		version int
		ok      bool
		text    string
	}{{130100, true, ""}, {120904, true, ""}, {11401, false, "cuBLASLt 11.4.1"}, {140002, false, "cuBLASLt 14.0.2"}, {0, false, "cuBLASLt 0.0.0"}} {
		err := checkCuBLASLtVersion(tt.version, "/x/libcublasLt.so")
		if tt.ok {
			assert.NoError(t, err, "%d", tt.version)
			continue
		}
		require.Error(t, err, "%d", tt.version)
		assert.ErrorIs(t, err, ErrNoCuBLASLt)
		assert.Contains(t, err.Error(), tt.text)
	}
}

// TestColMajorShape checks the operand swap that turns row-major GEMMs
// into cuBLASLt's column-major ones.
func TestColMajorShape(t *testing.T) {
	typ, err := gemmTypeOf(dag.BF16, false)
	require.NoError(t, err)
	tests := []struct {
		name string
		spec dag.GemmSpec
		want [][]int64 // m n k; xrows xcols ldx transx; yrows ycols ldy transy; ldc
	}{
		{"plain", dag.GemmSpec{GemmShape: dag.GemmShape{M: 2, N: 3, K: 4}, LDA: 4, LDB: 3, LDC: 3},
			[][]int64{{3, 2, 4}, {3, 4, 3, 0}, {4, 2, 4, 0}, {3}}},
		{"transposed", dag.GemmSpec{GemmShape: dag.GemmShape{M: 2, N: 3, K: 4}, TransA: true, TransB: true, LDA: 5, LDB: 6, LDC: 7},
			[][]int64{{3, 2, 4}, {4, 3, 6, 1}, {2, 4, 5, 1}, {7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := colMajorShape(&tt.spec, typ, [4]uint32{256, 256, 256, 256})
			got := [][]int64{
				{int64(s.m), int64(s.n), int64(s.k)},
				{int64(s.xrows), int64(s.xcols), int64(s.ldx), int64(s.transx)},
				{int64(s.yrows), int64(s.ycols), int64(s.ldy), int64(s.transy)},
				{int64(s.ldc)},
			}
			assert.Equal(t, tt.want, got)
		})
	}
	_, err = gemmTypeOf(dag.I32, false)
	assert.ErrorContains(t, err, "not i32")
}

func TestViewAlign(t *testing.T) {
	b := &dag.Buffer{Size: 1 << 20}
	for _, tt := range []struct {
		off  int64
		want uint32
	}{{0, 256}, {2, 2}, {48, 16}, {512, 256}, {1024 + 64, 64}} {
		assert.Equal(t, tt.want, viewAlign(b.Slice(tt.off, 8)), "offset %d", tt.off)
	}
	tmp := &dag.Buffer{Size: 1 << 20, Temporary: true}
	assert.Equal(t, uint32(16), viewAlign(tmp.Slice(0, 8)), "pool allocations are counted on for 16 bytes")
	assert.Equal(t, uint32(4), viewAlign(tmp.Slice(36, 8)))
}

// skipOrFail skips a GPU-machine test, or fails it when DAGRUN_REQUIRE_GPU=1.
func skipOrFail(t *testing.T, format string, a ...any) {
	t.Helper()
	if os.Getenv("DAGRUN_REQUIRE_GPU") == "1" {
		t.Fatalf("DAGRUN_REQUIRE_GPU=1, but "+format, a...)
	}
	t.Skipf(format, a...)
}

// TestCuBLASLtBindingMatchesHeaders builds testdata/cublaslt_check.c
// against the real cublasLt.h with the values the binding declares, and
// runs it: a cuBLASLt whose enums or structures moved fails here.
func TestCuBLASLtBindingMatchesHeaders(t *testing.T) {
	var majors strings.Builder
	majors.WriteString("#define SUPPORTED_MAJORS \\\n")
	for _, m := range cublasLtMajors {
		fmt.Fprintf(&majors, "\tif (CUBLAS_VER_MAJOR == %d) major_ok = 1; \\\n", m)
	}
	majors.WriteString("\n")
	checkBinding(t, "cublaslt_check.c", "cublasLt.h", cublasBinding(), majors.String())
}

// gemmTolerance bounds |gpu - cpu| for one output element: both accumulate
// in f32 (f64 for f64) in different orders, over mag = |alpha| sum |a b| +
// |beta c|, and f16/bf16 results may round to neighbouring values.
func gemmTolerance(dt dag.DType, tf32 bool, want, mag float64) float64 {
	switch {
	case dt == dag.F64:
		return 1e-12 * mag
	case tf32: // inputs rounded to 10 mantissa bits
		return 2e-3 * mag
	case dt == dag.F16:
		return 1e-5*mag + 0x1p-10*math.Abs(want)
	case dt == dag.BF16:
		return 1e-5*mag + 0x1p-7*math.Abs(want)
	}
	return 1e-5 * mag
}

// gemmMagnitudes is |alpha| sum |a b| + |beta c| for every element of C's
// layout, from the stored inputs.
func gemmMagnitudes(s *dag.GemmSpec, dt dag.DType, a, b, c []byte) map[int64]float64 {
	la, lb, lc := s.LayoutA(), s.LayoutB(), s.LayoutC()
	es := dt.Size()
	at := func(x []byte, l dag.GemmMatrix, bi, r, col int64, trans bool) float64 {
		if trans {
			r, col = col, r
		}
		return dag.ElemValue(x[(bi*l.Stride+r*l.LD+col)*es:], dt)
	}
	out := map[int64]float64{}
	for bi := range s.Batch {
		for i := range s.M {
			for j := range s.N {
				var m float64
				for p := range s.K {
					m += math.Abs(at(a, la, bi, i, p, s.TransA) * at(b, lb, bi, p, j, s.TransB))
				}
				e := bi*lc.Stride + i*lc.LD + j
				out[e] = math.Abs(s.Alpha)*m + math.Abs(s.Beta*dag.ElemValue(c[e*es:], dt))
			}
		}
	}
	return out
}

type gemmCase struct {
	name         string
	dt           dag.DType
	shape        dag.GemmShape
	opts         []dag.OpOption
	tf32, output bool
	batch        int64
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, dt := range []dag.DType{dag.F32, dag.F64, dag.F16, dag.BF16} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			var opts []dag.OpOption
			if tr[0] {
				opts = append(opts, dag.TransA())
			}
			if tr[1] {
				opts = append(opts, dag.TransB())
			}
			name := fmt.Sprintf("%s/tA=%v/tB=%v", dt, tr[0], tr[1])
			cs = append(cs,
				gemmCase{name: name, dt: dt, shape: dag.GemmShape{M: 67, N: 45, K: 129}, opts: opts},
				gemmCase{name: name + "/batched/beta", dt: dt, shape: dag.GemmShape{M: 32, N: 24, K: 40}, batch: 3,
					opts: append([]dag.OpOption{dag.Beta(0.5), dag.Alpha(2)}, opts...)},
				gemmCase{name: name + "/into d", dt: dt, shape: dag.GemmShape{M: 16, N: 64, K: 32}, output: true,
					opts: append([]dag.OpOption{dag.Beta(1)}, opts...)},
			)
		}
	}
	cs = append(cs, gemmCase{name: "f32/tf32", dt: dag.F32, shape: dag.GemmShape{M: 128, N: 128, K: 256}, tf32: true,
		opts: []dag.OpOption{dag.TF32()}})
	// Tuned for fewer SMs than the device has (SM_COUNT_TARGET), as the
	// split pass tunes GEMMs that run beside a collective.
	cs = append(cs, gemmCase{name: "bf16/leaving SMs", dt: dag.BF16, shape: dag.GemmShape{M: 512, N: 256, K: 384},
		opts: []dag.OpOption{dag.LeavingSMs(100)}})
	return cs
}

// gemmGraph declares one GEMM of c on device 0 with random operands.
func gemmGraph(t testing.TB, c gemmCase) *dag.Graph {
	bd := dag.New()
	// The options' spec, from an op of a throwaway builder.
	probe := dag.New().Buffer("probe", 4)
	s := *dag.New().Gemm(probe.All(), probe.All(), probe.All(), c.shape, c.opts...).Gemm
	s.Batch = max(c.batch, 1)
	la, lb := s.LayoutA(), s.LayoutB()
	es := c.dt.Size()
	batch := max(c.batch, 1)
	dev := dag.OnDevice(0)
	a := bd.Buffer("a", batch*la.Rows*la.Cols*es, dev, dag.Of(c.dt), dag.Random(1))
	b := bd.Buffer("b", batch*lb.Rows*lb.Cols*es, dev, dag.Of(c.dt), dag.Random(2))
	cb := bd.Buffer("c", batch*c.shape.M*c.shape.N*es, dev, dag.Of(c.dt), dag.Random(3))
	opts := append([]dag.OpOption{dag.Batched(batch, 0, 0, 0)}, c.opts...)
	if c.output {
		d := bd.Buffer("d", cb.Size, dev, dag.Of(c.dt), dag.Value(5))
		opts = append(opts, dag.Output(d.All()))
	}
	bd.Gemm(cb.All(), a.All(), b.All(), c.shape, opts...).With(dag.Name("mm"))
	g, err := bd.Build()
	require.NoError(t, err)
	return g
}

// TestGemmAgainstCPU runs GEMMs of every dtype, transpose, batch and output
// on the GPU, eagerly on one and on three streams and as a captured graph,
// and compares them with the cpu backend (gonum) within gemmTolerance.
func TestGemmAgainstCPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	for _, c := range gemmCases() {
		t.Run(c.name, func(t *testing.T) {
			g := gemmGraph(t, c)
			p, err := planner.New(g)
			require.NoError(t, err)
			want, err := executor.Execute(context.Background(), cpu.New(), p)
			require.NoError(t, err)
			got, err := executor.Execute(context.Background(), b, p)
			if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
				t.Skipf("no cuBLASLt: %v", err)
			}
			require.NoError(t, err)
			compareGemm(t, g, c, got, want)
		})
	}
}

func compareGemm(t *testing.T, g *dag.Graph, c gemmCase, got, want map[*dag.Buffer][]byte) {
	t.Helper()
	op := g.Ops[len(g.Ops)-1]
	s := op.Gemm
	bufs := map[string]*dag.Buffer{}
	for _, b := range g.Buffers {
		bufs[b.Name] = b
	}
	out := bufs["c"]
	if c.output {
		out = bufs["d"]
		assert.Equal(t, want[bufs["c"]], got[bufs["c"]], "c is only read")
	}
	mag := gemmMagnitudes(s, c.dt, want[bufs["a"]], want[bufs["b"]], bufs["c"].InitialBytes())
	es := c.dt.Size()
	bad := 0
	for e, m := range mag {
		w := dag.ElemValue(want[out][e*es:], c.dt)
		x := dag.ElemValue(got[out][e*es:], c.dt)
		if tol := gemmTolerance(c.dt, c.tf32, w, m); math.Abs(w-x) > tol || math.IsNaN(x) {
			if bad++; bad <= 5 {
				t.Errorf("element %d: gpu %g, cpu %g, tolerance %g", e, x, w, tol)
			}
		}
	}
	assert.Zero(t, bad, "elements out of tolerance")
}

// TestGemmCapturedAndStreams checks that a chain of GEMMs gives the same
// bytes eagerly on one stream, on four, and replayed from a CUDA graph: the
// algorithm does not depend on the stream.
func TestGemmCapturedAndStreams(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	bd := dag.New()
	dev := dag.OnDevice(0)
	const n = 256
	x := bd.Buffer("x", n*n*2, dev, dag.Of(dag.BF16), dag.Random(1))
	w := bd.Buffer("w", n*n*2, dev, dag.Of(dag.BF16), dag.Random(2))
	var outs []*dag.Buffer
	for i := range 6 {
		y := bd.Buffer(fmt.Sprintf("y%d", i), n*n*2, dev, dag.Of(dag.BF16), dag.Zeros())
		bd.Gemm(y.All(), x.All(), w.All(), dag.GemmShape{M: n, N: n, K: n}, dag.Alpha(1.0/n))
		bd.Launch(dag.Gelu, dag.Grid1(64), dag.Grid1(256), y, y)
		outs = append(outs, y)
	}
	g, err := bd.Build()
	require.NoError(t, err)
	var first map[*dag.Buffer][]byte
	for _, streams := range []int{1, 4} {
		p, err := planner.New(g, planner.Streams(streams))
		require.NoError(t, err)
		got, err := executor.Execute(context.Background(), b, p)
		if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
			t.Skipf("no cuBLASLt: %v", err)
		}
		require.NoError(t, err)
		if first == nil {
			first = got
			for _, y := range outs[1:] {
				assert.Equal(t, got[outs[0]], got[y], "the same GEMM gives the same bytes")
			}
			continue
		}
		for _, y := range outs {
			assert.Equal(t, first[y], got[y], "%s on %d streams", y.Name, streams)
		}
	}
	p, err := planner.New(g, planner.Streams(4))
	require.NoError(t, err)
	sess, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, sess.Close()) }()
	cg, err := sess.Capture(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, cg.Close()) }()
	require.NoError(t, cg.Run(context.Background()))
	for _, y := range outs {
		got, err := sess.Read(y)
		require.NoError(t, err)
		assert.Equal(t, first[y], got, "%s replayed from a graph", y.Name)
	}
}

// TestGemmBadInput checks the errors of GEMMs the library cannot run.
func TestGemmBadInput(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	t.Run("missing cuBLASLt", func(t *testing.T) {
		// A backend whose only candidate is missing: what a machine
		// without cuBLASLt sees.
		nb := gpuBackend(t, CacheDir(t.TempDir()), CuBLASLt(filepath.Join(t.TempDir(), "libcublasLt.so.13")))
		g := gemmGraph(t, gemmCase{dt: dag.F32, shape: dag.GemmShape{M: 8, N: 8, K: 8}})
		_, err := nb.Open(context.Background(), g)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrNoCuBLASLt)
		assert.Contains(t, err.Error(), `op "mm"`)
		assert.Contains(t, err.Error(), "libcublasLt.so.13")
		assertReleased(t, nb, "after a failed Open")
		p, err := planner.New(g)
		require.NoError(t, err)
		_, err = executor.Execute(context.Background(), cpu.New(), p)
		assert.NoError(t, err, "the cpu backend runs the same graph")
	})
	t.Run("misaligned rebinding", func(t *testing.T) {
		c := gemmCase{dt: dag.BF16, shape: dag.GemmShape{M: 8, N: 8, K: 8}}
		g := gemmGraph(t, c)
		se := openSession(t, b, g)
		defer func() { require.NoError(t, se.Close()) }()
		op := *g.Ops[len(g.Ops)-1]
		op.Access = append([]dag.Access(nil), op.Access...)
		op.Access[dag.GemmA].View = dag.View{Buf: op.Access[dag.GemmA].Buf, Offset: 2, Size: op.Access[dag.GemmA].Size - 2}
		require.NoError(t, se.sub.NewStream(0, dag.Normal))
		err := se.sub.Run(0, &op)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "mm")
	})
}

// TestGemmNoLeaks opens and closes GEMM graphs and checks that the
// gemmer gives back every workspace and handle.
func TestGemmNoLeaks(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	rng := rand.New(rand.NewPCG(1, 1))
	for range 3 {
		c := gemmCase{dt: dag.BF16, shape: dag.GemmShape{M: 1024 + int64(rng.IntN(64)), N: 2048, K: 4096}}
		g := gemmGraph(t, c)
		p, err := planner.New(g)
		require.NoError(t, err)
		_, err = executor.Execute(context.Background(), b, p)
		if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
			t.Skipf("no cuBLASLt: %v", err)
		}
		require.NoError(t, err)
		assertReleased(t, b, "after a gemm session")
	}
}
