package cpu

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dagrun/dagrun/dag"
)

// GEMMs run on gonum's native BLAS, which is row-major like dagrun's
// matrices: f32 and f64 directly, f16 and bf16 converted to f32 and
// multiplied with f32 accumulation, then rounded once to the dtype.

// checkGemm makes sure a Gemm op's views hold what its spec reaches, so a
// hand-made graph cannot make the BLAS index out of range.
func checkGemm(op *dag.Op) error { return dag.CheckGemmViews(op) }

// gemmKernel is the Go function of a Gemm op; mem holds its accesses.
func gemmKernel(op *dag.Op) (kernelFunc, error) {
	if err := checkGemm(op); err != nil {
		return nil, err
	}
	return func(stop *atomic.Bool, _ []dag.Arg, mem [][]byte) error {
		return runGemm(stop, op, mem)
	}, nil
}

func runGemm(stop *atomic.Bool, op *dag.Op, mem [][]byte) error {
	s := op.Gemm
	dt := op.Access[0].Buf.DType
	out := s.OutAccess()
	// The output starts as C (beta C is read from it), unless D is C.
	if s.SeparateD && s.Beta != 0 {
		copyMatrices(mem[out], mem[dag.GemmC], s.LayoutC(), s.Batch, int(dt.Size()))
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	if s.TransA {
		tA = blas.Trans
	}
	if s.TransB {
		tB = blas.Trans
	}
	la, lb, lc := s.LayoutA(), s.LayoutB(), s.LayoutC()
	m, n, k := int(s.M), int(s.N), int(s.K)
	impl := gonum.Implementation{}
	switch dt {
	case dag.F64:
		a, b, c := f64View(mem[dag.GemmA]), f64View(mem[dag.GemmB]), f64View(mem[out])
		for i := range int(s.Batch) {
			ai, bi, ci := batchOf(a.s, la, i), batchOf(b.s, lb, i), batchOf(c.s, lc, i)
			if !rowTiles(stop, m, n, k, gemmTileFlops, func(r0, r1 int) {
				impl.Dgemm(tA, tB, r1-r0, n, k, s.Alpha, ai[rowsOfA(r0, la, s.TransA):], int(la.LD), bi, int(lb.LD),
					s.Beta, ci[r0*int(lc.LD):], int(lc.LD))
			}) {
				return nil
			}
		}
		c.done()
		return nil
	case dag.F32:
		a, b, c := f32View(mem[dag.GemmA]), f32View(mem[dag.GemmB]), f32View(mem[out])
		alpha, beta := float32(s.Alpha), float32(s.Beta)
		for i := range int(s.Batch) {
			if !sgemmTiles(stop, impl, tA, tB, m, n, k, alpha, beta, batchOf(a.s, la, i), batchOf(b.s, lb, i), batchOf(c.s, lc, i), la, lb, lc, s.TransA, gemmTileFlops) {
				return nil
			}
		}
		applyEpilogue(s, c.s, biasOf(s, mem, dt))
		c.done()
		return nil
	}
	// f16, bf16: widen to f32, multiply, round each output element once.
	a, b := halfToF32(mem[dag.GemmA], dt), halfToF32(mem[dag.GemmB], dt)
	var c []float32
	if s.Beta != 0 {
		c = halfToF32(mem[out], dt)
	} else {
		c = make([]float32, len(mem[out])/2) // beta 0: C is not read, NaNs included
	}
	alpha, beta := float32(s.Alpha), float32(s.Beta)
	for i := range int(s.Batch) {
		if !sgemmTiles(stop, impl, tA, tB, m, n, k, alpha, beta, batchOf(a, la, i), batchOf(b, lb, i), batchOf(c, lc, i), la, lb, lc, s.TransA, gemmTileFlops) {
			return nil
		}
	}
	// As cuBLASLt does, the epilogue works on the f32 result, which is
	// rounded to the dtype once, after it.
	applyEpilogue(s, c, biasOf(s, mem, dt))
	// Only the matrices' elements are written back: gaps between rows
	// (ldc > n) and batches keep their bytes.
	dst := mem[out]
	for i := range int(s.Batch) {
		for r := range int(lc.Rows) {
			base := i*int(lc.Stride) + r*int(lc.LD)
			for j := range int(lc.Cols) {
				e := base + j
				var h uint16
				if dt == dag.F16 {
					h = dag.F16FromFloat32(c[e])
				} else {
					h = dag.BF16FromFloat32(c[e])
				}
				binary.LittleEndian.PutUint16(dst[2*e:], h)
			}
		}
	}
	return nil
}

// biasOf is the bias of s's epilogue as f32 values, nil without one.
func biasOf(s *dag.GemmSpec, mem [][]byte, dt dag.DType) []float32 {
	bi := s.BiasAccess()
	if bi < 0 {
		return nil
	}
	b := floats{mem[bi], dt}
	out := make([]float32, b.n())
	for i := range out {
		out[i] = b.at(i)
	}
	return out
}

// applyEpilogue applies s's epilogue to the elements of the result in c,
// in f32 and in the builtins' order: the bias added (one f32 rounding),
// then the activation, as bias_add, gelu and relu compute them.
func applyEpilogue(s *dag.GemmSpec, c, bias []float32) {
	act := s.Epilogue.Activation()
	if s.Epilogue == dag.NoEpilogue {
		return
	}
	l := s.LayoutC()
	for i := range int(s.Batch) {
		for r := range int(l.Rows) {
			row := c[i*int(l.Stride)+r*int(l.LD):][:l.Cols]
			for j, v := range row {
				if bias != nil {
					v += bias[j]
				}
				switch act {
				case dag.EpiGelu:
					v = Gelu(v)
				case dag.EpiRelu:
					v = Relu(v)
				}
				row[j] = v
			}
		}
	}
}

// gemmTileFlops bounds the work between two looks at stop: a few tens of
// milliseconds on a 2-core machine, so that an abandoned run (Ctrl-C)
// stops well within half a second even inside a GPU-sized GEMM, while
// tiles stay large enough for the BLAS to run at full speed.
const gemmTileFlops = 1 << 29

// rowTiles calls f for blocks of rows [r0, r1) of an m x n x k product's
// output, each about tileFlops of work, looking at stop before each;
// it reports false when stop cut the product short.
func rowTiles(stop *atomic.Bool, m, n, k, tileFlops int, f func(r0, r1 int)) bool {
	rows := max(1, tileFlops/max(1, 2*n*k))
	for r0 := 0; r0 < m; r0 += rows {
		if stop.Load() {
			return false
		}
		f(r0, min(m, r0+rows))
	}
	return true
}

// rowsOfA is the offset in A of row r0 of op(A): a row of A, or with
// trans a column (A is then k x m).
func rowsOfA(r0 int, la dag.GemmMatrix, trans bool) int {
	if trans {
		return r0
	}
	return r0 * int(la.LD)
}

// sgemmTiles is one f32 product of a batch, in row tiles (rowTiles).
func sgemmTiles(stop *atomic.Bool, impl gonum.Implementation, tA, tB blas.Transpose, m, n, k int, alpha, beta float32,
	a, b, c []float32, la, lb, lc dag.GemmMatrix, transA bool, tileFlops int) bool {
	return rowTiles(stop, m, n, k, tileFlops, func(r0, r1 int) {
		impl.Sgemm(tA, tB, r1-r0, n, k, alpha, a[rowsOfA(r0, la, transA):], int(la.LD), b, int(lb.LD),
			beta, c[r0*int(lc.LD):], int(lc.LD))
	})
}

// batchOf is matrix i of a batch of layout l within x.
func batchOf[T any](x []T, l dag.GemmMatrix, i int) []T {
	start := i * int(l.Stride)
	return x[start : start+int((l.Rows-1)*l.LD+l.Cols)]
}

// elemSlice is a byte slice seen as elements: the bytes themselves when
// they are aligned for T (the usual case), else a copy written back by done.
type elemSlice[T any] struct {
	s   []T
	raw []byte // the bytes a copy came from; nil when s aliases them
	put func([]byte, T)
}

func viewAs[T any](b []byte, put func([]byte, T), get func([]byte) T) elemSlice[T] {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(b) / size
	if n == 0 {
		return elemSlice[T]{}
	}
	if uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0 {
		return elemSlice[T]{s: unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)}
	}
	s := make([]T, n)
	for i := range s {
		s[i] = get(b[i*size:])
	}
	return elemSlice[T]{s: s, raw: b, put: put}
}

func f32View(b []byte) elemSlice[float32] {
	return viewAs(b, func(p []byte, v float32) { binary.LittleEndian.PutUint32(p, math.Float32bits(v)) },
		func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) })
}

func f64View(b []byte) elemSlice[float64] {
	return viewAs(b, func(p []byte, v float64) { binary.LittleEndian.PutUint64(p, math.Float64bits(v)) },
		func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) })
}

// done writes a copy back to the bytes it came from.
func (e elemSlice[T]) done() {
	if e.raw == nil {
		return
	}
	size := len(e.raw) / len(e.s)
	for i, v := range e.s {
		e.put(e.raw[i*size:], v)
	}
}

func halfToF32(b []byte, dt dag.DType) []float32 {
	out := make([]float32, len(b)/2)
	for i := range out {
		h := binary.LittleEndian.Uint16(b[2*i:])
		if dt == dag.F16 {
			out[i] = dag.F16ToFloat32(h)
		} else {
			out[i] = dag.BF16ToFloat32(h)
		}
	}
	return out
}

// copyMatrices copies the elements of a batch of layout l from src to dst,
// leaving the bytes between rows and matrices alone.
func copyMatrices(dst, src []byte, l dag.GemmMatrix, batch int64, es int) {
	row := int(l.Cols) * es
	for i := range int(batch) {
		for r := range int(l.Rows) {
			off := (i*int(l.Stride) + r*int(l.LD)) * es
			copy(dst[off:off+row], src[off:off+row])
		}
	}
}
