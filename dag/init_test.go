package dag

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// sequential is the i-th draw of SplitMix64 seeded with seed, made the
// way writeRandom makes it: i+1 calls of next.
func sequential(seed uint64, i int) uint64 {
	r := splitmix{state: seed}
	var v uint64
	for range i + 1 {
		v = r.next()
	}
	return v
}

// TestSplitmixCounterForm: the counter form a device uses (splitmixAt)
// gives the draws of the sequential generator the CPU uses, for seeds at
// the edges of uint64 and random ones, at every index of a prefix.
func TestSplitmixCounterForm(t *testing.T) {
	seeds := []uint64{0, 1, 42, 0x9e3779b97f4a7c15, math.MaxUint64 - 1, math.MaxUint64, 1 << 63}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		seeds = append(seeds, rng.Uint64())
	}
	for _, seed := range seeds {
		r := splitmix{state: seed}
		for i := range uint64(1000) {
			want := r.next()
			if got := splitmixAt(seed, i); got != want {
				t.Fatalf("seed %#x draw %d: counter form %#x, sequential %#x", seed, i, got, want)
			}
		}
	}
}

// TestSplitmixCounterFormTable pins SplitMix64's published first outputs
// for seed 0, so that a change to both forms at once shows too, and checks
// far draws of other seeds against the sequential generator.
func TestSplitmixCounterFormTable(t *testing.T) {
	for _, tt := range []struct {
		seed, i, want uint64
	}{
		{0, 0, 0xe220a8397b1dcdaf},
		{0, 1, 0x6e789e6aa1b965f4},
		{0, 2, 0x06c45d188009454f},
		{42, 0, sequential(42, 0)},
		{42, 999, sequential(42, 999)},
		{math.MaxUint64, 0, sequential(math.MaxUint64, 0)},
		{math.MaxUint64, 77, sequential(math.MaxUint64, 77)},
	} {
		require.Equal(t, tt.want, splitmixAt(tt.seed, tt.i), "seed %#x draw %d", tt.seed, tt.i)
	}
}

// FuzzSplitmixCounterForm: any seed, any index below a few thousand.
func FuzzSplitmixCounterForm(f *testing.F) {
	f.Add(uint64(0), uint16(0))
	f.Add(uint64(math.MaxUint64), uint16(4095))
	f.Fuzz(func(t *testing.T, seed uint64, i uint16) {
		n := int(i % 4096)
		if got, want := splitmixAt(seed, uint64(n)), sequential(seed, n); got != want {
			t.Fatalf("seed %#x draw %d: counter form %#x, sequential %#x", seed, n, got, want)
		}
	})
}

// TestWriteRandomParts: a large buffer made in parts side by side holds
// the bytes of one sequential pass, for every dtype, with and without a
// tail past the last whole element (left as it was), for several numbers
// of parts.
func TestWriteRandomParts(t *testing.T) {
	sizes := []int{randomChunkMin * 2, 3<<20 + 5}
	if !testing.Short() {
		sizes = append(sizes, 16<<20+3)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 7, 16} {
		runtime.GOMAXPROCS(procs)
		for _, dt := range DTypes() {
			for _, size := range sizes {
				want := bytes.Repeat([]byte{0xa5}, size) // the tail keeps what was there
				got := slices.Clone(want)
				writeRandomFrom(want, dt, 42)
				writeRandom(got, dt, 42)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("%d procs, %s, %d bytes: byte %d (element %d) is %#x, the sequential pass made %#x",
						procs, dt, size, i, i/int(dt.Size()), got[i], want[i])
				}
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkWriteRandom16MiB: the 16 MiB random input of
// examples/double_buffer.yaml (u8, pinned: made on the host), and an f32
// buffer of the same size.
func BenchmarkWriteRandom16MiB(b *testing.B) {
	for _, dt := range []DType{U8, F32} {
		b.Run(dt.String(), func(b *testing.B) {
			buf := New().Buffer("x", 16<<20, Of(dt), Random(42))
			out := make([]byte, buf.Size)
			b.SetBytes(buf.Size)
			for b.Loop() {
				buf.WriteInitial(out)
			}
		})
	}
}
