package dag

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Element is the Go types that hold a buffer's elements: uint8 for u8,
// int32 for i32, int64 for i64, float64 for f64, and float32 for f32, f16
// and bf16 (the half types convert, rounding to nearest even).
type Element interface {
	uint8 | int32 | int64 | float32 | float64
}

// DTypeError says that values of one Go type were given for, or asked of,
// a buffer of an element type that another Go type holds.
type DTypeError struct {
	DType DType  // the buffer's element type
	Go    string // the Go type asked for
}

func (e *DTypeError) Error() string {
	return fmt.Sprintf("%s elements are not %s: use []%s", e.DType, e.Go, GoType(e.DType))
}

// GoType is the name of the Go type that holds elements of dt.
func GoType(dt DType) string {
	switch dt {
	case U8:
		return "uint8"
	case I32:
		return "int32"
	case I64:
		return "int64"
	case F64:
		return "float64"
	}
	return "float32"
}

// holds reports whether T is the Go type of dt's elements.
func holds[T Element](dt DType) bool {
	var z T
	var want any
	switch GoType(dt) {
	case "uint8":
		want = uint8(0)
	case "int32":
		want = int32(0)
	case "int64":
		want = int64(0)
	case "float64":
		want = float64(0)
	default:
		want = float32(0)
	}
	return any(z) == want
}

// EncodeValues returns vals as the little-endian bytes of elements of dt;
// a *DTypeError when T is not dt's Go type.
func EncodeValues[T Element](dt DType, vals []T) ([]byte, error) {
	if !dt.Valid() || !holds[T](dt) {
		return nil, &DTypeError{DType: dt, Go: fmt.Sprintf("%T", *new(T))}
	}
	out := make([]byte, len(vals)*int(dt.Size()))
	switch v := any(vals).(type) {
	case []uint8:
		copy(out, v)
	case []int32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
		}
	case []int64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(out[8*i:], uint64(x))
		}
	case []float64:
		for i, x := range v {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(x))
		}
	case []float32:
		for i, x := range v {
			switch dt {
			case F16:
				binary.LittleEndian.PutUint16(out[2*i:], F16FromFloat32(x))
			case BF16:
				binary.LittleEndian.PutUint16(out[2*i:], BF16FromFloat32(x))
			default:
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
			}
		}
	}
	return out, nil
}

// DecodeValues returns the elements of dt that data holds (a trailing part
// of an element is left out); a *DTypeError when T is not dt's Go type.
func DecodeValues[T Element](dt DType, data []byte) ([]T, error) {
	if !dt.Valid() || !holds[T](dt) {
		return nil, &DTypeError{DType: dt, Go: fmt.Sprintf("%T", *new(T))}
	}
	n := len(data) / int(dt.Size())
	out := make([]T, n)
	switch v := any(out).(type) {
	case []uint8:
		copy(v, data)
	case []int32:
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case []int64:
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case []float64:
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case []float32:
		for i := range v {
			switch dt {
			case F16:
				v[i] = F16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			case BF16:
				v[i] = BF16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			default:
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
	}
	return out, nil
}

// Data sets a buffer's initial contents to vals, encoded in the buffer's
// element type (give Array's type, or Of, before it). Values of a Go type
// that does not hold that type, or of a number that does not fill the
// buffer, are a Build error.
func Data[T Element](vals []T) BufferOption {
	return bufferFunc(func(b *Buffer) {
		data, err := EncodeValues(b.DType, vals)
		if err != nil {
			b.initErr = err.Error()
			return
		}
		dt := b.DType
		b.Init, b.initErr, b.dataOf = Init{Kind: InitBytes, Data: data}, "", &dt
	})
}
