//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Device buffers' random and value initial contents are made on the
// device (initdev.go); every test here reads them back and compares them
// byte for byte with dag.Buffer.InitialBytes, what every backend starts
// from.

// initBuf is one buffer of an initial-contents test: its whole-element
// size is built (one element at least), and set to size after Build,
// which refuses sizes that end in part of an element.
type initBuf struct {
	name string
	dt   dag.DType
	size int64 // bytes, tail included
	init dag.BufferOption
	what string // seed or value, for messages
}

// buildInit builds a graph of the buffers bufs on device 0, launching the
// builtin empty kernel first when withBuiltin (so that the builtin module
// is loaded before the buffers are made), and returns its buffers by name.
func buildInit(t testing.TB, bufs []initBuf, withBuiltin bool) (*dag.Graph, map[string]*dag.Buffer) {
	t.Helper()
	bl := dag.New()
	if withBuiltin {
		bl.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(32))
	}
	byName := map[string]*dag.Buffer{}
	for _, ib := range bufs {
		e := ib.dt.Size()
		byName[ib.name] = bl.Buffer(ib.name, max(ib.size/e*e, e), dag.OnDevice(0), dag.Of(ib.dt), ib.init)
	}
	g, err := bl.Build()
	require.NoError(t, err)
	for _, ib := range bufs {
		byName[ib.name].Size = ib.size // the tail, if any
	}
	return g, byName
}

// checkInit reads every buffer of bufs from s and compares it with its
// InitialBytes, reporting each that differs with its first difference.
func checkInit(t *testing.T, s *Session, bufs []initBuf, byName map[string]*dag.Buffer) {
	t.Helper()
	bad := 0
	for _, ib := range bufs {
		buf := byName[ib.name]
		got, err := s.Read(buf)
		require.NoError(t, err, ib.name)
		if msg := diffBytes(got, buf.InitialBytes(), ib.dt); msg != "" {
			bad++
			if bad > 20 {
				continue // counted below; the first 20 tell enough
			}
			t.Errorf("buffer %s (%s, %d bytes = %d elements + %d tail bytes, %s): %s",
				ib.name, ib.dt, ib.size, ib.size/ib.dt.Size(), ib.size%ib.dt.Size(), ib.what, msg)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d buffers differ; %d were made on the device", bad, len(bufs), s.hold.deviceInits)
		return
	}
	t.Logf("%d buffers equal InitialBytes; %d were made on the device", len(bufs), s.hold.deviceInits)
}

// randomBufs is a buffer for every dtype, seed of initSeeds and size of
// initSizes (the largest about big bytes).
func randomBufs(big int64) []initBuf {
	var out []initBuf
	for _, dt := range dag.DTypes() {
		for si, seed := range initSeeds {
			for _, size := range initSizes(dt, big) {
				out = append(out, initBuf{fmt.Sprintf("r_%s_s%d_%d", dt, si, size), dt, size, dag.Random(seed), fmt.Sprintf("seed %#x", seed)})
			}
		}
	}
	return out
}

// initValues are the values of each dtype's value tests: negative,
// fractional (truncated for integers), extremes, NaN, infinities, negative
// zero and subnormals; i64 and f64 values both with equal halves (a
// memset) and different ones (dagrun_fill64).
var initValues = map[dag.DType][]float64{
	dag.U8:   {0, 1, 7, 3.7, 255},
	dag.I32:  {0, -1, -123456, -2.5, math.MaxInt32, math.MinInt32, 0x01010101},
	dag.I64:  {0, -1, -2, 1, 1 << 40, -(1 << 62), 3.9, 0x100000001},
	dag.F32:  {0, 1, -0.5, 0.1, math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e-45, math.MaxFloat32},
	dag.F64:  {0, 1, -0.5, 1.0 / 3, math.NaN(), math.Inf(-1), math.Copysign(0, -1), 5e-324, math.MaxFloat64},
	dag.F16:  {0, 1.5, -65504, 0.1, math.NaN(), math.Inf(1), 6e-8, math.Copysign(0, -1)},
	dag.BF16: {0, 1.5, 3e38, -0.1, math.NaN(), math.Inf(-1), 1e-40},
}

func valueBufs(big int64) []initBuf {
	var out []initBuf
	for _, dt := range dag.DTypes() {
		for vi, v := range initValues[dt] {
			e := dt.Size()
			sizes := []int64{e, 3 * e, 1001 * e, (big/e | 1) * e}
			if e > 1 {
				sizes = append(sizes, 5*e+1, 5*e+e-1, e-1)
			}
			slices.Sort(sizes)
			for _, size := range slices.Compact(sizes) { // 5e+1 is 5e+e-1 for 2-byte elements
				out = append(out, initBuf{fmt.Sprintf("v_%s_%d_%d", dt, vi, size), dt, size, dag.Value(v), fmt.Sprintf("value %v (element %x)", v, dag.ElemBytes(dt, v))})
			}
		}
	}
	return out
}

// TestDeviceRandomInitGPU: random initial contents made on the device
// equal InitialBytes for every dtype, seeds at the edges of uint64, one
// element, odd counts, multi-MiB buffers and sizes that end in part of an
// element; the device made every one (the builtin module was loaded).
func TestDeviceRandomInitGPU(t *testing.T) {
	b := gpuBackend(t)
	bufs := randomBufs(3 << 20)
	g, byName := buildInit(t, bufs, true)
	s := openSession(t, b, g)
	defer func() { require.NoError(t, s.Close()) }()
	checkInit(t, s, bufs, byName)
	assert.Equal(t, len(bufs), s.hold.deviceInits, "buffers made on the device")
}

// TestDeviceValueInitGPU: value initial contents made on the device (by
// memsets, and dagrun_fill64 for 8-byte elements whose halves differ)
// equal InitialBytes.
func TestDeviceValueInitGPU(t *testing.T) {
	b := gpuBackend(t)
	bufs := valueBufs(2 << 20)
	g, byName := buildInit(t, bufs, true)
	s := openSession(t, b, g)
	defer func() { require.NoError(t, s.Close()) }()
	checkInit(t, s, bufs, byName)
	assert.Equal(t, len(bufs), s.hold.deviceInits, "buffers made on the device")
}

// TestDeviceInitPathGPU: on a fresh backend, a graph that launches no
// builtin makes small random buffers and small fill64 values on the host
// (loading the builtin module would cost more), memset values on the
// device, and loads the module for a buffer of deviceInitLoadMin bytes or
// more, after which small ones too are made on the device. Without NVRTC
// (and no cached module) everything that needs the module falls back to
// the host, and the session still opens.
func TestDeviceInitPathGPU(t *testing.T) {
	gpuBackend(t) // skips the whole test where there is no GPU
	bufs := []initBuf{
		{"small_random", dag.F32, 4 * 1000, dag.Random(1), "host"},
		{"small_fill64", dag.I64, 8 * 1000, dag.Value(-2), "host"},
		{"small_memset", dag.F32, 4 * 1000, dag.Value(0.25), "device"},
		{"big_random", dag.BF16, deviceInitLoadMin, dag.Random(2), "device, loading the module"},
		{"small_random_after", dag.U8, 1001, dag.Random(3), "device"},
		{"small_fill64_after", dag.F64, 8 * 1001, dag.Value(1), "device"},
	}
	t.Run("nvrtc", func(t *testing.T) {
		b := gpuBackend(t, CacheDir(filepath.Join(t.TempDir(), "cache")))
		g, byName := buildInit(t, bufs, false)
		s := openSession(t, b, g)
		defer func() { require.NoError(t, s.Close()) }()
		checkInit(t, s, bufs, byName)
		assert.Equal(t, 4, s.hold.deviceInits, "made on the device: %v", bufs)
		assert.Equal(t, 1, b.Live().Modules, "the builtin module, loaded for big_random")
	})
	t.Run("no-nvrtc", func(t *testing.T) {
		b := gpuBackend(t, CacheDir(""))
		b.comp.candidates = []string{filepath.Join(t.TempDir(), "libnvrtc.so")}
		g, byName := buildInit(t, bufs, false)
		s := openSession(t, b, g)
		defer func() { require.NoError(t, s.Close()) }()
		checkInit(t, s, bufs, byName)
		assert.Equal(t, 1, s.hold.deviceInits, "only the memset is made on the device")
		assert.Zero(t, b.Live().Modules)
	})
	t.Run("small-only", func(t *testing.T) {
		b := gpuBackend(t)
		g, byName := buildInit(t, bufs[:3], false)
		s := openSession(t, b, g)
		defer func() { require.NoError(t, s.Close()) }()
		checkInit(t, s, bufs[:3], byName)
		assert.Zero(t, b.Live().Modules, "no module is loaded for small buffers alone")
	})
}

// TestDeviceInitSeenByOpsGPU: the first op of a run, on a dagrun stream
// (non-blocking, so not ordered after the legacy stream the contents are
// made on), reads the finished contents: a copy of 16 MiB random f32 and
// value f64 device buffers to pinned memory equals their InitialBytes.
func TestDeviceInitSeenByOpsGPU(t *testing.T) {
	b := gpuBackend(t)
	bl := dag.New()
	x := bl.Buffer("x", 16<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(42))
	y := bl.Buffer("y", 16<<20, dag.OnDevice(0), dag.Of(dag.F64), dag.Value(-1.25))
	hx := bl.Buffer("hx", 16<<20, dag.PinnedHost(), dag.Zeros())
	hy := bl.Buffer("hy", 16<<20, dag.PinnedHost(), dag.Zeros())
	bl.Copy(hx.All(), x.All())
	bl.Copy(hy.All(), y.All())
	g, err := bl.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	for range 3 { // each a fresh session: the race, if any, is at open
		out, err := executor.Execute(context.Background(), b, p)
		require.NoError(t, err)
		for _, c := range []struct{ dev, host *dag.Buffer }{{x, hx}, {y, hy}} {
			if msg := diffBytes(out[c.host], c.dev.InitialBytes(), c.dev.DType); msg != "" {
				t.Errorf("%s copied by the first op: %s", c.dev.Name, msg)
			}
		}
	}
}

// BenchmarkSessionOpenRandom16MiB times OpenSession and Close of a graph
// of one 16 MiB random device buffer (and one with a 16 MiB value
// buffer), its contents made on the device against made on the host and
// uploaded (initContentsOnHost), beside the raw C floor that allocates and zeroes
// the same buffer. Reports medians in ms.
func BenchmarkSessionOpenRandom16MiB(b *testing.B) {
	be, beHost := gpuBackend(b), gpuBackend(b, initContentsOnHost())
	for _, tc := range []struct {
		name string
		dt   dag.DType
		init dag.BufferOption
	}{
		{"random-u8", dag.U8, dag.Random(42)},
		{"random-f32", dag.F32, dag.Random(42)},
		{"random-bf16", dag.BF16, dag.Random(42)},
		{"value-f32", dag.F32, dag.Value(1)},
		{"value-f64", dag.F64, dag.Value(1)},
	} {
		bl := dag.New()
		bl.Buffer("x", 16<<20, dag.OnDevice(0), dag.Of(tc.dt), tc.init)
		bl.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(32)) // the builtins, loaded as most graphs have them
		g, err := bl.Build()
		require.NoError(b, err)
		for _, onHost := range []bool{false, true} {
			where := "device"
			if onHost {
				where = "host"
			}
			b.Run(tc.name+"/"+where, func(b *testing.B) {
				be := be
				if onHost {
					be = beHost
				}
				raw, err := newRawSession(be, 0, 0, g)
				require.NoError(b, err)
				defer raw.free()
				var open, rawOpen []time.Duration
				once := func() {
					t0 := time.Now()
					s, err := be.OpenSession(context.Background(), g)
					require.NoError(b, err)
					t1 := time.Now()
					require.NoError(b, s.Close())
					t2 := time.Now()
					require.NoError(b, raw.open())
					t3 := time.Now()
					require.NoError(b, raw.close())
					open, rawOpen = append(open, t1.Sub(t0)), append(rawOpen, t3.Sub(t2))
				}
				for range 3 { // warm up: the module loaded, the allocator settled
					once()
				}
				open, rawOpen = nil, nil
				for b.Loop() {
					once()
				}
				ms := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e6 }
				b.ReportMetric(ms(open), "open-ms")
				b.ReportMetric(ms(rawOpen), "raw-open-ms")
				b.ReportMetric(ms(open)/ms(rawOpen), "open/raw")
			})
		}
	}
}
