package dag

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// halfFormat is one of the two 16-bit formats, for table-driven tests.
type halfFormat struct {
	name    string
	from32  func(float32) uint16
	from64  func(float64) uint16
	to32    func(uint16) float32
	maxBits uint16 // largest finite value
	minSub  float32
}

var halfFormats = []halfFormat{
	{"f16", F16FromFloat32, F16FromFloat64, F16ToFloat32, 0x7bff, 0x1p-24},
	{"bf16", BF16FromFloat32, BF16FromFloat64, BF16ToFloat32, 0x7f7f, 0x1p-133},
}

func isNaN16(f halfFormat, h uint16) bool { return math.IsNaN(float64(f.to32(h))) }

func TestHalfRoundTripsEveryPattern(t *testing.T) {
	for _, f := range halfFormats {
		t.Run(f.name, func(t *testing.T) {
			for i := range 1 << 16 {
				h := uint16(i)
				v := f.to32(h)
				if math.IsNaN(float64(v)) {
					assert.True(t, isNaN16(f, f.from32(v)), "%s %#04x: NaN stays NaN", f.name, h)
					continue
				}
				require.Equal(t, h, f.from32(v), "%s %#04x = %g", f.name, h, v)
				require.Equal(t, h, f.from64(float64(v)), "%s %#04x = %g from f64", f.name, h, v)
			}
		})
	}
}

// nearest is the reference rounding: the nearest of all finite values of
// the format by exhaustive search, ties to the even pattern, and infinity
// where IEEE 754 overflows (at or beyond max + half an ulp).
type nearest struct {
	vals []float64 // finite non-negative values, ascending
	bits []uint16
	f    halfFormat
}

func newNearest(f halfFormat) *nearest {
	n := &nearest{f: f}
	for i := uint16(0); i <= f.maxBits; i++ {
		n.vals = append(n.vals, float64(f.to32(i)))
		n.bits = append(n.bits, i)
	}
	return n
}

func (n *nearest) round(x float64) uint16 {
	sign := uint16(0)
	if math.Signbit(x) {
		sign = 0x8000
	}
	a := math.Abs(x)
	top := len(n.vals) - 1
	ulp := n.vals[top] - n.vals[top-1]
	if a >= n.vals[top]+ulp/2 {
		return sign | (n.f.maxBits + 1) // infinity
	}
	i := sort.SearchFloat64s(n.vals, a)
	if i > top {
		return sign | n.bits[top]
	}
	if n.vals[i] == a || i == 0 {
		return sign | n.bits[i]
	}
	lo, hi := n.vals[i-1], n.vals[i]
	switch {
	case a-lo < hi-a:
		return sign | n.bits[i-1]
	case a-lo > hi-a:
		return sign | n.bits[i]
	case n.bits[i-1]&1 == 0:
		return sign | n.bits[i-1]
	}
	return sign | n.bits[i]
}

func TestHalfRoundsToNearestEven(t *testing.T) {
	for _, f := range halfFormats {
		t.Run(f.name, func(t *testing.T) {
			ref := newNearest(f)
			require.True(t, sort.Float64sAreSorted(ref.vals))
			var xs []float64
			// Every midpoint between neighbours and the points just beside it.
			for i := 1; i < len(ref.vals); i++ {
				mid := (ref.vals[i-1] + ref.vals[i]) / 2
				xs = append(xs, mid, math.Nextafter(mid, 0), math.Nextafter(mid, 1e300))
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 200000 {
				xs = append(xs, float64(math.Float32frombits(r.Uint32())))
			}
			for _, x := range xs {
				if math.IsNaN(x) {
					continue
				}
				x32 := float32(x)
				if float64(x32) == x {
					require.Equal(t, ref.round(x), f.from32(x32), "%s from f32 %g (%#08x)", f.name, x32, math.Float32bits(x32))
				}
				require.Equal(t, ref.round(x), f.from64(x), "%s from f64 %g", f.name, x)
				require.Equal(t, ref.round(-x), f.from64(-x), "%s from f64 %g", f.name, -x)
			}
		})
	}
}

func TestHalfEdgeCases(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name string
		in   float64
		f16  uint16
		bf16 uint16
	}{
		{"zero", 0, 0, 0},
		{"negative zero", math.Copysign(0, -1), 0x8000, 0x8000},
		{"one", 1, 0x3c00, 0x3f80},
		{"minus two", -2, 0xc000, 0xc000},
		{"largest f16", 65504, 0x7bff, 0x4780},
		{"below the f16 overflow midpoint", 65519.99, 0x7bff, 0x4780},
		{"the f16 overflow midpoint", 65520, 0x7c00, 0x4780},
		{"f16 overflow", 1e6, 0x7c00, 0x4974},
		{"largest bf16", 0x1.fep127, 0x7c00, 0x7f7f},
		{"the bf16 overflow midpoint", 0x1.ffp127, 0x7c00, 0x7f80},
		{"f64 far beyond both", 1e300, 0x7c00, 0x7f80},
		{"infinity", inf, 0x7c00, 0x7f80},
		{"minus infinity", -inf, 0xfc00, 0xff80},
		{"smallest f16 subnormal", 0x1p-24, 0x0001, 0x3380},
		{"half the smallest f16 subnormal ties to zero", 0x1p-25, 0x0000, 0x3300},
		{"just above half the smallest f16 subnormal", 0x1.0001p-25, 0x0001, 0x3300},
		{"1.5 subnormals ties to two", 0x1.8p-24, 0x0002, 0x33c0},
		{"largest f16 subnormal", 0x3ffp-24, 0x03ff, 0x3880},
		{"smallest f16 normal", 0x1p-14, 0x0400, 0x3880},
		{"subnormal rounding up to the smallest normal", 0x3ff8p-28, 0x0400, 0x3880},
		{"smallest bf16 subnormal", 0x1p-133, 0, 0x0001},
		{"half the smallest bf16 subnormal", 0x1p-134, 0, 0},
		{"f64 subnormal", 5e-324, 0, 0},
		{"1 + 2^-11 ties to even (down)", 1 + 0x1p-11, 0x3c00, 0x3f80},
		{"1 + 3*2^-11 ties to even (up)", 1 + 3*0x1p-11, 0x3c02, 0x3f80},
		{"bf16 tie down", 1 + 0x1p-8, 0x3c04, 0x3f80},
		{"bf16 tie up", 1 + 3*0x1p-8, 0x3c0c, 0x3f82},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.f16, F16FromFloat64(tt.in), "f16 from f64")
			assert.Equal(t, tt.bf16, BF16FromFloat64(tt.in), "bf16 from f64")
			if x := float32(tt.in); float64(x) == tt.in {
				assert.Equal(t, tt.f16, F16FromFloat32(x), "f16 from f32")
				assert.Equal(t, tt.bf16, BF16FromFloat32(x), "bf16 from f32")
			}
		})
	}
	t.Run("nan", func(t *testing.T) {
		for _, f := range halfFormats {
			for _, x := range []float64{nan, -nan, math.Float64frombits(0x7ff0000000000001)} {
				h := f.from64(x)
				assert.True(t, isNaN16(f, h), "%s of NaN %#x is %#04x", f.name, math.Float64bits(x), h)
				assert.Equal(t, math.Signbit(x), h&0x8000 != 0, "%s keeps the sign", f.name)
				h32 := f.from32(float32(x))
				assert.True(t, isNaN16(f, h32), "%s of f32 NaN is %#04x", f.name, h32)
			}
			// A signalling f32 NaN whose payload lies only in dropped bits stays a NaN.
			assert.True(t, isNaN16(f, f.from32(math.Float32frombits(0x7f800001))), f.name)
		}
	})
}

func TestHalfInitAndFill(t *testing.T) {
	for _, tt := range []struct {
		dt   DType
		v    float64
		want uint16
	}{{F16, 1.5, 0x3e00}, {BF16, 1.5, 0x3fc0}, {F16, -65504, 0xfbff}, {BF16, 3.0e38, 0x7f62}} {
		b := New().Buffer("x", 6, Of(tt.dt), Value(tt.v))
		got := b.InitialBytes()
		for i := 0; i < 6; i += 2 {
			assert.Equal(t, tt.want, binary.LittleEndian.Uint16(got[i:]), "%s %g", tt.dt, tt.v)
		}
		assert.Equal(t, float64(tt.dt.Size()), 2.0)
		assert.InDelta(t, tt.v, ElemValue(got, tt.dt), math.Abs(tt.v)*0x1p-8)
	}
	for _, dt := range []DType{F16, BF16} {
		b := New().Buffer("r", 2*4096, Of(dt), Random(7))
		got := b.InitialBytes()
		distinct := map[float64]bool{}
		for i := 0; i < len(got); i += 2 {
			v := ElemValue(got[i:], dt)
			require.True(t, v >= 0 && v < 1, "%s random %g outside [0, 1)", dt, v)
			distinct[v] = true
		}
		assert.Greater(t, len(distinct), 200, "%s random values vary", dt)
		assert.Equal(t, got, New().Buffer("r", 2*4096, Of(dt), Random(7)).InitialBytes(), "same seed, same bytes")
	}
}

func TestDTypeTable(t *testing.T) {
	for _, dt := range DTypes() {
		got, ok := ParseDType(dt.String())
		assert.True(t, ok, dt.String())
		assert.Equal(t, dt, got)
		assert.Positive(t, dt.Size())
	}
	assert.False(t, DType(len(DTypes())).Valid())
	assert.Equal(t, int64(2), F16.Size())
	assert.Equal(t, int64(2), BF16.Size())
	assert.True(t, BF16.Float())
	assert.False(t, I32.Float())
}
