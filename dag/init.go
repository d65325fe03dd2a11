package dag

import (
	"encoding/binary"
	"math"
)

// InitialBytes returns b's contents before a run, made from b.Init. Every
// backend starts from exactly these bytes.
func (b *Buffer) InitialBytes() []byte {
	out := make([]byte, b.Size)
	b.fillInitial(out)
	return out
}

func (b *Buffer) fillInitial(out []byte) {
	switch b.Init.Kind {
	case InitBytes:
		copy(out, b.Init.Data)
	case InitValue:
		FillElems(out, b.DType, b.Init.Value)
	case InitRandom:
		r := splitmix{state: b.Init.Seed}
		es := int(b.DType.Size())
		for i := 0; i+es <= len(out); i += es {
			x := r.next()
			switch b.DType {
			case U8:
				out[i] = byte(x)
			case I32:
				binary.LittleEndian.PutUint32(out[i:], uint32(x&0xff))
			case I64:
				binary.LittleEndian.PutUint64(out[i:], x&0xff)
			case F32:
				binary.LittleEndian.PutUint32(out[i:], math.Float32bits(float32(x>>40)/(1<<24)))
			case F64:
				binary.LittleEndian.PutUint64(out[i:], math.Float64bits(float64(x>>11)/(1<<53)))
			case F16: // multiples of 2^-11: exact in binary16
				binary.LittleEndian.PutUint16(out[i:], F16FromFloat32(float32(x>>53)/(1<<11)))
			case BF16: // multiples of 2^-8: exact in bfloat16
				binary.LittleEndian.PutUint16(out[i:], BF16FromFloat32(float32(x>>56)/(1<<8)))
			}
		}
	}
}

// FillElems sets every whole element of mem, read as dt, to v.
func FillElems(mem []byte, dt DType, v float64) {
	pat := ElemBytes(dt, v)
	for i := 0; i+len(pat) <= len(mem); i += len(pat) {
		copy(mem[i:], pat)
	}
}

// ElemBytes is the little-endian encoding of v as one element of dt.
func ElemBytes(dt DType, v float64) []byte {
	out := make([]byte, dt.Size())
	switch dt {
	case U8:
		out[0] = byte(int64(v))
	case I32:
		binary.LittleEndian.PutUint32(out, uint32(int32(v)))
	case I64:
		binary.LittleEndian.PutUint64(out, uint64(int64(v)))
	case F32:
		binary.LittleEndian.PutUint32(out, math.Float32bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(out, math.Float64bits(v))
	case F16:
		binary.LittleEndian.PutUint16(out, F16FromFloat64(v))
	case BF16:
		binary.LittleEndian.PutUint16(out, BF16FromFloat64(v))
	}
	return out
}

// splitmix is SplitMix64: tiny, fast and identical everywhere.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
