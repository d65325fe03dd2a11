package comm

import (
	"fmt"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// number is the element types collectives take.
type number interface {
	~uint8 | ~int32 | ~int64 | ~float32 | ~float64
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
// each as long as dst) with NCCL's semantics for a world of len(srcs)
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

func reduceInts[T ~uint8 | ~int32 | ~int64](op dag.Reduction, dst []byte, srcs [][]byte) {
	acc := decode[T](srcs[0])
	for _, s := range srcs[1:] {
		combine(op, acc, decode[T](s))
	}
	if op == dag.Avg {
		n := T(len(srcs))
		for i := range acc {
			acc[i] /= n
		}
	}
	encode(dst, acc)
}

func reduceFloats[T ~float32 | ~float64](op dag.Reduction, dst []byte, srcs [][]byte) {
	inv := T(1) / T(len(srcs))
	pre := func(v []T) []T {
		if op == dag.Avg {
			for i := range v {
				v[i] *= inv
			}
		}
		return v
	}
	acc := pre(decode[T](srcs[0]))
	for _, s := range srcs[1:] {
		combine(op, acc, pre(decode[T](s)))
	}
	encode(dst, acc)
}
