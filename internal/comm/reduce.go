package comm

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// number is the element types collectives take (uint16: the bits of f16
// and bf16, which reduce in f32).
type number interface {
	~uint8 | ~uint16 | ~int32 | ~int64 | ~float32 | ~float64
}

// decode copies b into a new slice of T (host byte order: every platform
// Go and CUDA share is little-endian). The copy keeps the elements aligned
// whatever b's offset.
func decode[T number](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	v := make([]T, n)
	if n > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(b)), b)
	}
	return v
}

// encode copies v into dst, which holds exactly its bytes.
func encode[T number](dst []byte, v []T) {
	if len(v) > 0 {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(dst)))
	}
}

// Reduce sets dst to the reduction of srcs (one per rank, in rank order,
// each as long as dst; dst may be srcs[0] but no other) with NCCL's semantics for a world of len(srcs)
// ranks: integer sums and products wrap; avg of integers sums, then divides
// (truncating toward zero); avg of floats multiplies each rank's elements
// by 1/N in the element type, then sums.
func Reduce(dt dag.DType, op dag.Reduction, dst []byte, srcs [][]byte) error {
	if len(srcs) == 0 {
		return fmt.Errorf("reduce: no ranks")
	}
	if !op.Valid() {
		return fmt.Errorf("reduce: unknown reduction %d", op)
	}
	if int64(len(dst))%dt.Size() != 0 {
		return fmt.Errorf("reduce: %d bytes are not a whole number of %s elements", len(dst), dt)
	}
	for r, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("reduce: rank %d has %d bytes, the result %d", r, len(s), len(dst))
		}
	}
	switch dt {
	case dag.U8:
		reduceInts[uint8](op, dst, srcs)
	case dag.I32:
		reduceInts[int32](op, dst, srcs)
	case dag.I64:
		reduceInts[int64](op, dst, srcs)
	case dag.F32:
		reduceFloats[float32](op, dst, srcs)
	case dag.F64:
		reduceFloats[float64](op, dst, srcs)
	case dag.F16, dag.BF16:
		reduceHalves(dt, op, dst, srcs)
	default:
		return fmt.Errorf("reduce: element type %s is not one collectives take", dt)
	}
	return nil
}

func combine[T number](op dag.Reduction, acc, x []T) {
	switch op {
	case dag.Sum, dag.Avg:
		for i := range acc {
			acc[i] += x[i]
		}
	case dag.Prod:
		for i := range acc {
			acc[i] *= x[i]
		}
	case dag.Max:
		for i := range acc {
			acc[i] = max(acc[i], x[i])
		}
	case dag.Min:
		for i := range acc {
			acc[i] = min(acc[i], x[i])
		}
	}
}

// view returns b's elements as a []T sharing b's memory when b is aligned
// for T (a make([]byte) of 8 bytes or more is), else a copy; aliased
// reports which.
func view[T number](b []byte) (v []T, aliased bool) {
	var zero T
	sz := int(unsafe.Sizeof(zero))
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(sz) != 0 {
		return decode[T](b), false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz), true
}

// accumulate reduces into dst (which may be srcs[0] itself): dst starts as
// srcs[0], pre scales each rank's elements (nil: none), post finishes.
func accumulate[T number](op dag.Reduction, dst []byte, srcs [][]byte, pre func([]T), post func([]T)) {
	copy(dst, srcs[0])
	acc, aliased := view[T](dst)
	if pre != nil {
		pre(acc)
	}
	for _, s := range srcs[1:] {
		x, xa := view[T](s)
		if pre != nil {
			if xa {
				x = decode[T](s) // scale a copy: srcs are read-only
			}
			pre(x)
		}
		combine(op, acc, x)
	}
	if post != nil {
		post(acc)
	}
	if !aliased {
		encode(dst, acc)
	}
}

func reduceInts[T ~uint8 | ~int32 | ~int64](op dag.Reduction, dst []byte, srcs [][]byte) {
	var post func([]T)
	if op == dag.Avg {
		n := T(len(srcs))
		post = func(acc []T) {
			for i := range acc {
				acc[i] /= n
			}
		}
	}
	accumulate(op, dst, srcs, nil, post)
}

func reduceFloats[T ~float32 | ~float64](op dag.Reduction, dst []byte, srcs [][]byte) {
	var pre func([]T)
	if op == dag.Avg {
		inv := T(1) / T(len(srcs))
		pre = func(v []T) {
			for i := range v {
				v[i] *= inv
			}
		}
	}
	accumulate(op, dst, srcs, pre, nil)
}

// reduceHalves reduces f16 or bf16 elements in f32 and rounds each result
// once. NCCL rounds at every hop of its ring, so a GPU's result may differ
// from this one in the last place of the half type.
func reduceHalves(dt dag.DType, op dag.Reduction, dst []byte, srcs [][]byte) {
	wide := make([][]byte, len(srcs))
	for r, s := range srcs {
		w := make([]byte, 2*len(s))
		for i := 0; i < len(s); i += 2 {
			binary.LittleEndian.PutUint32(w[2*i:], math.Float32bits(halfToFloat(dt, binary.LittleEndian.Uint16(s[i:]))))
		}
		wide[r] = w
	}
	acc := make([]byte, 2*len(dst))
	reduceFloats[float32](op, acc, wide)
	for i := 0; i < len(dst); i += 2 {
		binary.LittleEndian.PutUint16(dst[i:], halfFromFloat(dt, math.Float32frombits(binary.LittleEndian.Uint32(acc[2*i:]))))
	}
}

func halfToFloat(dt dag.DType, h uint16) float32 {
	if dt == dag.BF16 {
		return dag.BF16ToFloat32(h)
	}
	return dag.F16ToFloat32(h)
}

func halfFromFloat(dt dag.DType, f float32) uint16 {
	if dt == dag.BF16 {
		return dag.BF16FromFloat32(f)
	}
	return dag.F16FromFloat32(f)
}
