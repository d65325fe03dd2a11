//go:build cgo

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// The CPU side of the device-made initial contents: a line-by-line Go copy
// of dagrun_init_random checked against dag's own making, so that where
// the GPU test fails and these pass, the fault is in compiling or
// launching the kernel, not in its arithmetic. Keep it in step with the
// kernel in builtins.go.

// exactBits is dr_exact_bits: the bits of k * 2^-frac in the IEEE format
// of mbits mantissa bits and exponent bias bias.
func exactBits(k uint64, frac, mbits, bias int) uint64 {
	if k == 0 {
		return 0
	}
	p := 63 - bits.LeadingZeros64(k)
	return uint64(p-frac+bias)<<mbits | (k<<(mbits-p))&(1<<mbits-1)
}

// splitmixAtMirror is dr_splitmix_at.
func splitmixAtMirror(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// kernelRandom is what dagrun_init_random leaves in a buffer of size
// bytes, with the tail past the last whole element zero (allocBuffer's
// memset).
func kernelRandom(dt dag.DType, size int64, seed uint64) []byte {
	out := make([]byte, size)
	le := binary.LittleEndian
	n := size / dt.Size()
	for i := range n {
		r := splitmixAtMirror(seed, uint64(i))
		switch int(dt) { // the kernel's switch, by number
		case 0:
			out[i] = byte(r)
		case 1:
			le.PutUint32(out[4*i:], uint32(r&0xff))
		case 2:
			le.PutUint64(out[8*i:], r&0xff)
		case 3:
			le.PutUint32(out[4*i:], uint32(exactBits(r>>40, 24, 23, 127)))
		case 4:
			le.PutUint64(out[8*i:], exactBits(r>>11, 53, 52, 1023))
		case 5:
			le.PutUint16(out[2*i:], uint16(exactBits(r>>53, 11, 10, 15)))
		case 6:
			le.PutUint16(out[2*i:], uint16(exactBits(r>>56, 8, 7, 127)))
		}
	}
	return out
}

// TestInitRandomDTypeNumbers: the kernel switches on dag.DType's numbers.
func TestInitRandomDTypeNumbers(t *testing.T) {
	assert.Equal(t, []dag.DType{dag.U8, dag.I32, dag.I64, dag.F32, dag.F64, dag.F16, dag.BF16}, dag.DTypes(),
		"dagrun_init_random's case numbers follow this order: change the kernel with it")
}

// TestExactBits checks dr_exact_bits against Go's conversions for every
// value each 16-bit and f32 draw can give, and for f64 at the edges and
// at random.
func TestExactBits(t *testing.T) {
	for k := range uint64(1 << 11) {
		want := dag.F16FromFloat32(float32(k) / (1 << 11))
		require.Equal(t, want, uint16(exactBits(k, 11, 10, 15)), "f16 k=%d", k)
	}
	for k := range uint64(1 << 8) {
		want := dag.BF16FromFloat32(float32(k) / (1 << 8))
		require.Equal(t, want, uint16(exactBits(k, 8, 7, 127)), "bf16 k=%d", k)
	}
	for k := range uint64(1 << 24) {
		if want := math.Float32bits(float32(k) / (1 << 24)); uint32(exactBits(k, 24, 23, 127)) != want {
			t.Fatalf("f32 k=%d: %#x, want %#x", k, exactBits(k, 24, 23, 127), want)
		}
	}
	ks := []uint64{0, 1, 2, 3, 1<<52 - 1, 1 << 52, 1<<53 - 1, 1<<53 - 2}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1 << 20 {
		k := rng.Uint64() >> 11
		ks = append(ks, k, k>>rng.IntN(53))
	}
	for _, k := range ks {
		if want := math.Float64bits(float64(k) / (1 << 53)); exactBits(k, 53, 52, 1023) != want {
			t.Fatalf("f64 k=%d: %#x, want %#x", k, exactBits(k, 53, 52, 1023), want)
		}
	}
}

// TestKernelRandomMirror: the Go copy of the kernel makes exactly the
// bytes of dag.Buffer.InitialBytes, for every dtype, odd sizes, sizes that
// leave a tail, and seeds at the edges of uint64.
func TestKernelRandomMirror(t *testing.T) {
	for _, dt := range dag.DTypes() {
		for _, seed := range initSeeds {
			for _, size := range initSizes(dt, 1<<16) {
				buf := &dag.Buffer{Name: "x", Size: size, DType: dt, Init: dag.Init{Kind: dag.InitRandom, Seed: seed}}
				if msg := diffBytes(kernelRandom(dt, size, seed), buf.InitialBytes(), dt); msg != "" {
					t.Fatalf("%s, %d bytes, seed %#x: %s", dt, size, seed, msg)
				}
			}
		}
	}
}

// TestInitRandomDeclared: the kernel is in the builtin library with the
// parameters initdev.go's launch passes, and its helpers are those the Go
// copy mirrors.
func TestInitRandomDeclared(t *testing.T) {
	assert.Contains(t, builtinSource, `extern "C" __global__ void `+initRandomKernel+`(void* x, i64 n, unsigned long long seed, int dt)`)
	assert.Contains(t, builtinSource, `unsigned long long z = seed + (i + 1ull) * 0x9e3779b97f4a7c15ull;`)
	for _, c := range []string{"(r >> 40, 24, 23, 127)", "(r >> 11, 53, 52, 1023)", "(r >> 53, 11, 10, 15)", "(r >> 56, 8, 7, 127)"} {
		assert.Equal(t, 1, strings.Count(builtinSource, "dr_exact_bits"+c), "the kernel makes one dtype with dr_exact_bits%s", c)
	}
}

// initSeeds are the seeds the initial-contents tests use: the edges of
// uint64, SplitMix64's own increment (so that a draw's state wraps to 0),
// and ordinary ones.
var initSeeds = []uint64{0, 1, 42, 1 << 63, math.MaxUint64, math.MaxUint64 - 0x9e3779b97f4a7c15 + 1, 0x9e3779b97f4a7c15}

// initSizes lists buffer sizes in bytes for elements of dt: one element,
// odd counts, an odd count of about big bytes, and sizes that end in a
// part of an element or hold none (which Build refuses, but a hand-made
// graph may have).
func initSizes(dt dag.DType, big int64) []int64 {
	e := dt.Size()
	sizes := []int64{e, 3 * e, 7 * e, 1001 * e, (big/e | 1) * e}
	if e > 1 {
		sizes = append(sizes, e-1)
	}
	for tail := int64(1); tail < e; tail += max(e/2-1, 1) {
		sizes = append(sizes, 5*e+tail, (big/e|1)*e+tail)
	}
	return sizes
}

// diffBytes describes how got differs from want, read as dt elements:
// the count of differing bytes and the first differing element, both
// values and their bytes; "" when they are equal.
func diffBytes(got, want []byte, dt dag.DType) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	first, ndiff := -1, 0
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			ndiff++
		}
	}
	if first < 0 {
		return ""
	}
	e := int(dt.Size())
	el := first / e
	lo, hi := el*e, min(el*e+e, len(got))
	msg := fmt.Sprintf("%d of %d bytes differ; the first at byte %d, element %d (dtype %s, %d whole elements)",
		ndiff, len(got), first, el, dt, len(got)/e)
	if hi-lo == e {
		msg += fmt.Sprintf(": got %x (%v), want %x (%v)", got[lo:hi], dag.ElemValue(got[lo:hi], dt), want[lo:hi], dag.ElemValue(want[lo:hi], dt))
	} else {
		msg += fmt.Sprintf(", in the tail past the last whole element: got %x, want %x", got[lo:hi], want[lo:hi])
	}
	return msg
}
