// Package devicetest checks a backend against the contract of package
// device, the way testing/fstest.TestFS checks a file system: a backend
// calls Run from its own tests, and every case runs as a subtest.
//
//	func TestConformance(t *testing.T) {
//		devicetest.Run(t, func(t *testing.T) device.Backend { return mybackend.New() },
//			devicetest.Reference(func(t *testing.T) device.Backend { return cpu.New() }))
//	}
//
// The cases drive a device.Session call by call where the contract is
// about calls (stream order, events and their generations, waits on events
// never recorded, capture fork and join, the SetBodies entry stream,
// faults, Close during work), and run graphs through the planner and the
// executor where it is about results: a graph for every op kind, run
// eagerly and replayed from a capture, gives what the reference backend
// gives. A capability the backend lacks skips its cases, naming the
// interface; an op the backend refuses at Open with an error matching
// errors.ErrUnsupported skips its case with that error.
package devicetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Opener makes a fresh backend for one case. Run closes it when the case
// ends.
type Opener func(t *testing.T) device.Backend

// Option changes what Run checks.
type Option func(*config)

type config struct {
	ref     Opener
	devices int
	timeout time.Duration
}

// Reference makes the op-kind cases compare every result with the one
// ref's backend gives for the same plan (the cpu backend, the project's
// oracle). Without it they compare a backend with itself, which checks
// only that its results do not depend on how the plan ran.
func Reference(ref Opener) Option { return func(c *config) { c.ref = ref } }

// Devices says how many devices the backend may use (1 by default): the
// cases of a world of ranks, rank r on device r, need 2.
func Devices(n int) Option { return func(c *config) { c.devices = n } }

// Timeout bounds each wait for the backend (10 s by default): a Sync that
// takes longer is reported as a hang, such as a wait that never ends.
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Run runs the suite on the backends open makes.
func Run(t *testing.T, open Opener, opts ...Option) {
	c := &config{devices: 1, timeout: 10 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.ref == nil {
		c.ref = open
	}
	s := &suite{config: c, open: open}
	t.Run("StreamOrder", s.streamOrder)
	t.Run("EventGenerations", s.eventGenerations)
	t.Run("WaitForPastGeneration", s.waitForPastGeneration)
	t.Run("WaitNeverRecorded", s.waitNeverRecorded)
	t.Run("OpErrors", s.opErrors)
	t.Run("Capture", s.capture)
	t.Run("Bodies", s.bodies)
	t.Run("LoopMax", s.loopMax)
	t.Run("LoopMaxReplayed", s.loopMaxReplayed)
	t.Run("Faults", s.faults)
	t.Run("Write", s.write)
	t.Run("Shared", s.shared)
	t.Run("CloseDuringWork", s.closeDuringWork)
	t.Run("Kinds", s.kinds)
}

type suite struct {
	*config
	open Opener
}

// backend opens a backend for t, closed when t ends.
func (s *suite) backend(t *testing.T, open Opener) device.Backend {
	t.Helper()
	b := open(t)
	require.NotNil(t, b, "the Opener returned no backend")
	t.Cleanup(func() { require.NoError(t, b.Close(), "closing the backend") })
	return b
}

// session opens a device session for g on a fresh backend, with streams
// streams on device 0 and events events; it is closed when t ends.
func (s *suite) session(t *testing.T, g *dag.Graph, streams, events int) device.Session {
	t.Helper()
	b := s.backend(t, s.open)
	ds, err := b.Open(s.ctx(t), g)
	skipUnsupported(t, err)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ds.Close(), "closing the session") })
	for range streams {
		require.NoError(t, ds.NewStream(0, dag.Normal))
	}
	for range events {
		require.NoError(t, ds.NewEvent())
	}
	return ds
}

// ctx is a context that ends after the suite's timeout.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), s.timeout)
	t.Cleanup(cancel)
	return ctx
}

// sync waits for ds, failing t with a hang when the timeout passes first.
func (s *suite) sync(t *testing.T, ds device.Session) error {
	t.Helper()
	err := ds.Sync(s.ctx(t))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync did not return within %v: the work hangs", s.timeout)
	}
	return err
}

// skipUnsupported skips t when the backend refused the graph as
// something it does not do.
func skipUnsupported(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the backend does not support it: %v", err)
	}
}

// capability returns ds as a T, or skips t naming the interface.
func capability[T any](t *testing.T, ds any) T {
	t.Helper()
	c, ok := ds.(T)
	if !ok {
		t.Skipf("%T does not implement %s", ds, typeName[T]())
	}
	return c
}

func typeName[T any]() string { return fmt.Sprintf("%T", (*T)(nil))[1:] }

// build builds the graph declare declares.
func build(t *testing.T, declare func(b *dag.Builder)) *dag.Graph {
	t.Helper()
	b := dag.New()
	declare(b)
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// f32s reads data as little-endian f32 values.
func f32s(data []byte) []float32 {
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

// readF32 reads buffer b of ds as f32 values.
func readF32(t *testing.T, ds device.Session, b *dag.Buffer) []float32 {
	t.Helper()
	data, err := ds.Read(b)
	require.NoError(t, err)
	return f32s(data)
}

// repeat is n copies of v.
func repeat(v float32, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// sameContents reports how got differs from want, buffer b's contents:
// byte for byte, or for f32 buffers when maxULP is not 0, within maxULP
// units in the last place or abs of each other (the absolute slack that
// kernels built on tanhf and expf need near zero).
func sameContents(b *dag.Buffer, got, want []byte, maxULP int64, abs float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d bytes, want %d", b.Name, len(got), len(want))
	}
	if b.DType == dag.F32 && maxULP > 0 {
		g, w := f32s(got), f32s(want)
		for i := range g {
			if ulps(g[i], w[i]) > maxULP && !(math.Abs(float64(g[i])-float64(w[i])) <= abs) {
				return fmt.Errorf("%s[%d] = %v, want %v (within %d ulp or %g)", b.Name, i, g[i], w[i], maxULP, abs)
			}
		}
		return nil
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: byte %d is %#x, want %#x", b.Name, i, got[i], want[i])
		}
	}
	return nil
}

// ulps is the distance between a and b in f32 values; NaNs are equal to
// each other and far from anything else.
func ulps(a, b float32) int64 {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an || bn:
		return math.MaxInt64
	}
	key := func(f float32) int64 {
		u := int64(math.Float32bits(f))
		if u&(1<<31) != 0 {
			return -(u &^ (1 << 31))
		}
		return u
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return d
}
