//go:build cgo

package cuda

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Fault injection and admission control on the GPU (skipped without a
// driver; DAGRUN_REQUIRE_GPU=1 makes a missing driver a failure).

// freeSlack is how far device memory may stay below where it was after a
// session closes: the memory pool keeps what temporaries used, up to its
// release threshold, and the driver allocates lazily.
const freeSlack = 256 << 20

func TestChaosExamplesGPU(t *testing.T) {
	const seeds = 20
	b := gpuBackend(t)
	ctx := context.Background()
	for _, ex := range examplePlans(t) {
		s, err := executor.Open(ctx, b, ex.p)
		require.NoError(t, err, ex.name)
		want, err := runDigests(ctx, s, ex.p.Graph, 1, 0, nil)
		require.NoError(t, err, ex.name)
		require.NoError(t, s.Close())
		for seed := range uint64(seeds) {
			s, err := executor.Open(ctx, b, ex.p, executor.WithChaos(seed))
			require.NoError(t, err, ex.name)
			got, err := runDigests(ctx, s, ex.p.Graph, 2, 0, nil)
			require.NoError(t, err, "%s seed %d", ex.name, seed)
			assert.Equal(t, want[0], got[0], "%s seed %d: outputs differ from the plain run", ex.name, seed)
			require.NoError(t, s.Close())
		}
	}
	assertReleased(t, b, "after the chaos runs")
}

func TestFailOpEveryOpGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	free0, _, err := b.FreeMemory(0)
	require.NoError(t, err)
	ops := 0
	for _, ex := range examplePlans(t) {
		for _, op := range ex.p.Graph.Ops {
			ops++
			s, err := executor.Open(ctx, b, ex.p, executor.WithFailOp(op.Name))
			require.NoError(t, err, ex.name)
			err = s.Run(ctx)
			oe, ok := errors.AsType[*dag.OpError](err)
			require.True(t, ok, "%s --fail-op %s: %v", ex.name, op.Name, err)
			assert.Equal(t, op.Name, oe.Op, ex.name)
			assert.ErrorIs(t, err, executor.ErrInjected)
			// The session runs again (failing again) and closes cleanly.
			assert.ErrorIs(t, s.Run(ctx), executor.ErrInjected)
			require.NoError(t, s.Close(), "%s --fail-op %s", ex.name, op.Name)
			live := b.Live()
			assert.Zero(t, live.Streams, "%s --fail-op %s: streams left", ex.name, op.Name)
			assert.Zero(t, live.Callbacks, "%s --fail-op %s: callbacks left", ex.name, op.Name)
		}
	}
	assertReleased(t, b, "after failing every op")
	free1, _, err := b.FreeMemory(0)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, free1, free0-freeSlack, "device memory free before %d, after %d", free0, free1)
	t.Logf("failed %d ops in turn; device memory free before %d, after %d", ops, free0, free1)
}

func TestFreeMemoryGPU(t *testing.T) {
	b := gpuBackend(t)
	for _, dev := range []int{0, device.HostMemory} {
		free, total, err := b.FreeMemory(dev)
		require.NoError(t, err)
		assert.Positive(t, free)
		assert.LessOrEqual(t, free, total)
	}
	_, _, err := b.FreeMemory(1 << 20)
	assert.Error(t, err)
}

func TestAdmissionRefusesMoreThanTheDeviceHasGPU(t *testing.T) {
	b := gpuBackend(t)
	_, total, err := b.FreeMemory(0)
	require.NoError(t, err)
	bld := dag.New()
	big := bld.Buffer("big", (total+1<<30)&^3, dag.Zeros())
	out := bld.Buffer("out", 16, dag.PinnedHost(), dag.Zeros())
	bld.Fill(big.All(), 1)
	bld.Copy(out.All(), big.Slice(0, 16))
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	_, err = executor.Execute(context.Background(), b, p)
	me, ok := errors.AsType[*executor.MemoryError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, 0, me.Device)
	assert.Equal(t, "big", me.Buffers[0].Name)
	assertReleased(t, b, "after a refused plan")
}

func TestDelayAndFailRefusedWhenClosedGPU(t *testing.T) {
	b := gpuBackend(t)
	p := examplePlans(t)[0].p
	s, err := b.OpenSession(context.Background(), p.Graph)
	require.NoError(t, err)
	require.NoError(t, s.NewStream(0, 0))
	require.NoError(t, s.Delay(0, 1000))
	require.NoError(t, s.Sync(context.Background()))
	require.NoError(t, s.Fail(0, p.Graph.Ops[0], executor.ErrInjected))
	err = s.Sync(context.Background())
	oe, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, p.Graph.Ops[0].Name, oe.Op)
	require.NoError(t, s.Close())
	assert.Error(t, s.Delay(0, 1000))
	assert.Error(t, s.Fail(0, p.Graph.Ops[0], executor.ErrInjected))
	assertReleased(t, b, "after the session")
}

// TestCloseWhileARunIsInFlightGPU closes an executor session from another
// goroutine during a long run: the run returns an error at once, and the
// close drains the queued spins and releases everything.
func TestCloseWhileARunIsInFlightGPU(t *testing.T) {
	b := gpuBackend(t)
	bld := dag.New()
	x := bld.Buffer("x", 16, dag.Zeros())
	for range 100 {
		bld.Launch(dag.Spin, dag.Dim3{X: 1, Y: 1, Z: 1}, dag.Dim3{X: 1, Y: 1, Z: 1}, 10_000.0)
		bld.Fill(x.All(), 1)
	}
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	s, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, s.Close()) // waits for the queued spins: at most 1 s
	select {
	case err := <-done:
		require.ErrorContains(t, err, "closed")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	assertReleased(t, b, "after closing a session in flight")
}
