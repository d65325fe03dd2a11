package cpu_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// spinGraph is n spin kernels of us microseconds, each followed by a fill.
func spinGraph(t *testing.T, n int, us float64) *dag.Graph {
	bld := dag.New()
	x := bld.Buffer("x", 16, dag.Zeros())
	for range n {
		bld.Launch(dag.Spin, dag.Dim3{X: 1, Y: 1, Z: 1}, dag.Dim3{X: 1, Y: 1, Z: 1}, us)
		bld.Fill(x.All(), 1)
	}
	g, err := bld.Build()
	require.NoError(t, err)
	return g
}

func TestDelayPausesTheStream(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	s, err := b.OpenSession(context.Background(), spinGraph(t, 1, 0))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.NewStream(0, 0))
	start := time.Now()
	require.NoError(t, s.Delay(0, 20*time.Millisecond))
	require.NoError(t, s.Sync(context.Background()))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	require.Error(t, s.Delay(0, -1))
	require.Error(t, s.Delay(1, 0), "no stream 1")

	// A long pause ends with the context.
	require.NoError(t, s.Delay(0, time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	require.ErrorIs(t, s.Sync(ctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestFailSkipsTheWorkAfterIt(t *testing.T) {
	g := spinGraph(t, 2, 0)
	b := cpu.New()
	defer b.Close()
	s, err := b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.NewStream(0, 0))
	require.NoError(t, s.Run(0, g.Ops[0]))
	injected := errors.New("injected")
	require.NoError(t, s.Fail(0, g.Ops[1], injected))
	require.NoError(t, s.Run(0, g.Ops[1])) // skipped: x keeps its zeros
	err = s.Sync(context.Background())
	oe, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, g.Ops[1].Name, oe.Op)
	assert.ErrorIs(t, err, injected)
	data, err := s.Read(g.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, make([]byte, 16), data, "the op after the failure ran")
	// The next run is a run like any other.
	require.NoError(t, s.Run(0, g.Ops[1]))
	require.NoError(t, s.Sync(context.Background()))
	require.Error(t, s.Fail(0, nil, injected))
}

func TestCloseDuringSync(t *testing.T) {
	base := runtime.NumGoroutine()
	g := spinGraph(t, 200, 10_000) // 2 s unless stopped
	b := cpu.New(cpu.Workers(2))
	s, err := b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, s.NewStream(0, 0))
	}
	// The spins spread over the streams; the fills, which all write x
	// and which no event orders here, stay on one stream.
	for i, op := range g.Ops {
		stream := i % 3
		if op.Kind == dag.Fill {
			stream = 0
		}
		require.NoError(t, s.Run(stream, op))
	}
	done := make(chan error, 1)
	go func() { done <- s.Sync(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, s.Close())
	select {
	case err := <-done:
		require.ErrorContains(t, err, "closed")
	case <-time.After(2 * time.Second):
		t.Fatal("Sync did not return after Close")
	}
	assert.Zero(t, b.Sessions())
	require.Error(t, s.Sync(context.Background()))
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), base)
}

func TestFreeMemory(t *testing.T) {
	b := cpu.New()
	for _, dev := range []int{device.HostMemory, 0, 3} {
		free, total, err := b.FreeMemory(dev)
		require.NoError(t, err)
		assert.Positive(t, free)
		assert.LessOrEqual(t, free, total)
	}
	_, _, err := b.FreeMemory(-2)
	assert.Error(t, err)
	assert.True(t, b.DevicesInHostMemory())
}

func TestOpenRefusesPersistentBuffersBeyondTheHost(t *testing.T) {
	for _, size := range []int64{2 << 40, 200 << 40, 1 << 62} {
		bld := dag.New()
		big := bld.Buffer("big", size, dag.PinnedHost(), dag.Zeros())
		bld.Fill(big.All(), 1)
		g, err := bld.Build()
		require.NoError(t, err)
		b := cpu.New()
		require.NotPanics(t, func() {
			_, err = b.Open(context.Background(), g)
		})
		require.ErrorContains(t, err, "buffer big needs")
		assert.Zero(t, b.Sessions())
	}
}

// Two goroutines that Sync one session, one of them with a context that
// ends, both return: neither is stranded by the other's wait.
func TestConcurrentSyncs(t *testing.T) {
	g := spinGraph(t, 200, 10_000) // 2 s unless stopped
	s, err := cpu.New(cpu.Workers(2)).OpenSession(context.Background(), g)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.NewStream(0, 0))
	for _, op := range g.Ops {
		require.NoError(t, s.Run(0, op))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- s.Sync(ctx) }()
	time.Sleep(10 * time.Millisecond)
	go func() { done <- s.Sync(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	for range 2 {
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("a Sync never returned")
		}
	}
}
