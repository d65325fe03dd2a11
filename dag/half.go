package dag

import (
	"encoding/binary"
	"math"
)

// Half-precision floats as dagrun stores them: IEEE 754 binary16 (F16) and
// bfloat16 (BF16, the top half of a binary32), held as their bit patterns.
// Conversions to them round to nearest, ties to even, as CUDA's __float2half_rn
// and __float2bfloat16_rn do: values beyond the largest finite one become
// infinities, values below half the smallest subnormal become zeros, and a
// NaN stays a NaN (quiet, with its sign and top payload bits).

const (
	f16ExpBits, f16MantBits   = 5, 10
	bf16ExpBits, bf16MantBits = 8, 7
)

// F16FromFloat32 is the binary16 nearest to f (ties to even).
func F16FromFloat32(f float32) uint16 { return roundHalf(float64(f), f16ExpBits, f16MantBits) }

// F16FromFloat64 is the binary16 nearest to f, rounded once (no detour
// through float32, whose rounding could move a tie).
func F16FromFloat64(f float64) uint16 { return roundHalf(f, f16ExpBits, f16MantBits) }

// BF16FromFloat32 is the bfloat16 nearest to f (ties to even).
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign and top payload, set the quiet bit
		return uint16(b>>16) | 0x40
	}
	// Adding 0x7fff plus the lowest kept bit carries into bit 16 exactly
	// when the dropped half is above the midpoint, or at it with an odd
	// kept part; a carry out of the mantissa raises the exponent, up to
	// infinity, as rounding should.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BF16FromFloat64 is the bfloat16 nearest to f, rounded once.
func BF16FromFloat64(f float64) uint16 { return roundHalf(f, bf16ExpBits, bf16MantBits) }

// F16ToFloat32 is the value of binary16 h (exact).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN, payload kept
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0: // zero or subnormal: mant * 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BF16ToFloat32 is the value of bfloat16 h (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundHalf rounds f to the binary format with ebits of exponent and mbits
// of mantissa (at most 16 bits in all), to nearest, ties to even.
func roundHalf(f float64, ebits, mbits uint) uint16 {
	sign := uint16(0)
	if math.Signbit(f) {
		sign = 1 << (ebits + mbits)
	}
	expMask := uint16(1<<ebits-1) << mbits
	switch {
	case math.IsNaN(f):
		payload := uint16(math.Float64bits(f)>>(52-mbits)) & (1<<mbits - 1)
		return sign | expMask | payload | 1<<(mbits-1)
	case math.IsInf(f, 0):
		return sign | expMask
	case f == 0:
		return sign
	}
	a := math.Abs(f)
	bias := 1<<(ebits-1) - 1
	_, e := math.Frexp(a) // a = frac * 2^e with frac in [0.5, 1): floor(log2 a) = e-1
	e--
	if emin := 1 - bias; e < emin {
		e = emin // subnormal: the quantum stays the smallest one
	}
	if e > bias+1 {
		return sign | expMask // far beyond the largest finite value
	}
	// n is a in units of the quantum 2^(e-mbits): exact scaling by a
	// power of two, and an integer below 2^(mbits+1) after rounding, so
	// float64 holds every step exactly.
	n := math.RoundToEven(math.Ldexp(a, int(mbits)-e))
	// For a normal value n lies in [2^mbits, 2^(mbits+1)] and the encoding
	// is (e+bias-1)<<mbits + n: the implicit bit of n adds the missing one
	// to the exponent, and a rounding carry (n = 2^(mbits+1)) moves to the
	// next binade. For a subnormal e+bias-1 is 0 and n is the mantissa.
	bits := uint32(e+bias-1)<<mbits + uint32(n)
	if bits >= uint32(expMask) {
		return sign | expMask
	}
	return sign | uint16(bits)
}

// ElemValue reads the first element of mem as dt, as a float64 (exact for
// every dtype but i64 values beyond 2^53). Checksums and checks read
// buffers through it.
func ElemValue(mem []byte, dt DType) float64 {
	switch dt {
	case U8:
		return float64(mem[0])
	case I32:
		return float64(int32(binary.LittleEndian.Uint32(mem)))
	case I64:
		return float64(int64(binary.LittleEndian.Uint64(mem)))
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(mem)))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(mem))
	case F16:
		return float64(F16ToFloat32(binary.LittleEndian.Uint16(mem)))
	case BF16:
		return float64(BF16ToFloat32(binary.LittleEndian.Uint16(mem)))
	}
	return 0
}
