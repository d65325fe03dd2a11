package executor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// examplePlans are the plans of examples/*.yaml, by file name.
func examplePlans(t testing.TB) map[string]*planner.Plan {
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	plans := map[string]*planner.Plan{}
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err, f)
		if !oneDeviceExample(s) { // the model block and the ranks have tests of their own
			continue
		}
		p, err := planner.New(s.Graph, runOptions(s)...)
		require.NoError(t, err, f)
		plans[filepath.Base(f)] = p
	}
	return plans
}

// runOnce opens p on b with opts, runs it and reads every persistent
// buffer, closing the session whatever happens.
func runOnce(t testing.TB, b device.Backend, p *planner.Plan, opts ...executor.Option) (map[string][]byte, error) {
	s, err := executor.Open(context.Background(), b, p, opts...)
	if err != nil {
		return nil, err
	}
	defer func() { require.NoError(t, s.Close()) }()
	if err := s.Run(context.Background()); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, buf := range p.Graph.Buffers {
		if !buf.Temporary {
			data, err := s.Read(buf)
			require.NoError(t, err)
			out[buf.Name] = data
		}
	}
	return out, nil
}

// settled waits until the number of goroutines is back to at most base,
// and fails the test if it is not within a few seconds.
func settled(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), base, "goroutines left behind")
}

func TestChaosExamplesMatchThePlainRun(t *testing.T) {
	const seeds = 20
	for name, p := range examplePlans(t) {
		t.Run(name, func(t *testing.T) {
			b := cpu.New(cpu.Workers(4))
			defer b.Close()
			want, err := runOnce(t, b, p)
			require.NoError(t, err)
			for seed := range uint64(seeds) {
				got, err := runOnce(t, b, p, executor.WithChaos(seed))
				require.NoError(t, err, "seed %d", seed)
				for buf, data := range want {
					require.True(t, string(data) == string(got[buf]), "seed %d: buffer %s differs from the plain run", seed, buf)
				}
			}
			assert.Zero(t, b.Sessions())
		})
	}
}

func TestChaosRepeatsItsDelaysButNotAcrossSeeds(t *testing.T) {
	// Chaos must pause: a chain of ops takes measurably longer. Timing
	// here is a sanity bound, not a measurement: 64 ops with about half
	// paused up to ChaosMaxDelay sleep far above zero in all.
	bld := dag.New()
	x := bld.Buffer("x", 16, dag.Zeros())
	for range 64 {
		bld.Fill(x.All(), 1)
	}
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()
	s, err := executor.Open(context.Background(), b, p, executor.WithChaos(1), executor.WithTiming())
	require.NoError(t, err)
	defer s.Close()
	start := time.Now()
	require.NoError(t, s.Run(context.Background()))
	assert.Greater(t, time.Since(start), 64*executor.ChaosMaxDelay/16, "chaos paused far less than it draws")
}

func TestFailOpEveryOpOfEveryExample(t *testing.T) {
	base := runtime.NumGoroutine()
	ops := 0
	for name, p := range examplePlans(t) {
		t.Run(name, func(t *testing.T) {
			b := cpu.New(cpu.Workers(3))
			for _, op := range p.Graph.Ops {
				ops++
				_, err := runOnce(t, b, p, executor.WithFailOp(op.Name))
				require.Error(t, err, "op %s", op.Name)
				oe, ok := errors.AsType[*dag.OpError](err)
				require.True(t, ok, "op %s: %v is not an *dag.OpError", op.Name, err)
				assert.Equal(t, op.Name, oe.Op)
				assert.ErrorIs(t, err, executor.ErrInjected)
				assert.Zero(t, b.Sessions(), "op %s: sessions left open", op.Name)
			}
			// Under chaos too: the failure still names the op.
			op := p.Graph.Ops[len(p.Graph.Ops)/2]
			_, err := runOnce(t, b, p, executor.WithFailOp(op.Name), executor.WithChaos(7))
			oe, ok := errors.AsType[*dag.OpError](err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, op.Name, oe.Op)
			require.NoError(t, b.Close())
		})
	}
	settled(t, base)
	t.Logf("failed %d ops in turn", ops)
}

func TestFailOpSessionRunsAgainAfterTheFailure(t *testing.T) {
	// The injected failure is per run: each run fails at the op, and the
	// session stays usable (it is the op that fails, not the session).
	p := examplePlans(t)["temporaries.yaml"]
	b := cpu.New()
	defer b.Close()
	s, err := executor.Open(context.Background(), b, p, executor.WithFailOp("sum"))
	require.NoError(t, err)
	defer s.Close()
	for range 3 {
		err := s.Run(context.Background())
		assert.ErrorIs(t, err, executor.ErrInjected)
	}
}

func TestFaultOptionsRefused(t *testing.T) {
	p := examplePlans(t)["fan_out.yaml"]
	b := cpu.New()
	defer b.Close()
	_, err := executor.Open(context.Background(), b, p, executor.WithFailOp("no_such_op"))
	require.ErrorContains(t, err, `no op "no_such_op"`)
	assert.Zero(t, b.Sessions())

	// A backend that cannot inject faults is refused at Open, and its
	// session is closed.
	f := &fakeBackend{}
	_, err = executor.Open(context.Background(), f, p, executor.WithChaos(1))
	require.ErrorContains(t, err, "device.Delayer")
	assert.Contains(t, f.calls, "Close")
	f = &fakeBackend{}
	_, err = executor.Open(context.Background(), f, p, executor.WithFailOp(p.Graph.Ops[0].Name))
	require.ErrorContains(t, err, "device.Failer")
	assert.Contains(t, f.calls, "Close")
}

func TestCaptureRunsWithoutFaults(t *testing.T) {
	// Faults are for eager runs: a graph captured from a session with
	// WithFailOp replays without the failure.
	p := examplePlans(t)["fan_out.yaml"]
	b := cpu.New()
	defer b.Close()
	s, err := executor.Open(context.Background(), b, p, executor.WithFailOp(p.Graph.Ops[0].Name), executor.WithChaos(3))
	require.NoError(t, err)
	defer s.Close()
	g, err := s.Capture(context.Background())
	require.NoError(t, err)
	require.NoError(t, g.Run(context.Background()))
	require.ErrorIs(t, s.Run(context.Background()), executor.ErrInjected)
}

// spinPlan is a plan of n spin kernels of us microseconds on one buffer.
func spinPlan(t testing.TB, n int, us float64) *planner.Plan {
	bld := dag.New()
	x := bld.Buffer("x", 16, dag.Zeros())
	for range n {
		bld.Launch(dag.Spin, dag.Dim3{X: 1, Y: 1, Z: 1}, dag.Dim3{X: 1, Y: 1, Z: 1}, us)
		bld.Fill(x.All(), 1)
	}
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

func TestCloseWhileARunIsInFlight(t *testing.T) {
	base := runtime.NumGoroutine()
	p := spinPlan(t, 400, 10_000) // 4 s if nothing stops it
	b := cpu.New()
	s, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, s.Close())
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "closed")
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	assert.Zero(t, b.Sessions())
	require.ErrorContains(t, s.Run(context.Background()), "closed")
	require.NoError(t, b.Close())
	settled(t, base)
}

func TestBlockingCallsHonourTheirContext(t *testing.T) {
	p := spinPlan(t, 400, 10_000)
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 30*time.Millisecond)
	}
	b := cpu.New()
	defer b.Close()
	within := func(t *testing.T, f func() error) error {
		t.Helper()
		start := time.Now()
		err := f()
		require.Less(t, time.Since(start), 2*time.Second, "the call outlived its context")
		return err
	}

	t.Run("Session.Run", func(t *testing.T) {
		s, err := executor.Open(context.Background(), b, p)
		require.NoError(t, err)
		defer s.Close()
		ctx, cancel := short()
		defer cancel()
		err = within(t, func() error { return s.Run(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("Execute", func(t *testing.T) {
		ctx, cancel := short()
		defer cancel()
		err := within(t, func() error { _, err := executor.Execute(ctx, b, p); return err })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("Graph.Run", func(t *testing.T) {
		s, err := executor.Open(context.Background(), b, p)
		require.NoError(t, err)
		defer s.Close()
		g, err := s.Capture(context.Background())
		require.NoError(t, err)
		ctx, cancel := short()
		defer cancel()
		err = within(t, func() error { return g.Run(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("Graph.Sync", func(t *testing.T) {
		s, err := executor.Open(context.Background(), b, p)
		require.NoError(t, err)
		defer s.Close()
		g, err := s.Capture(context.Background())
		require.NoError(t, err)
		require.NoError(t, g.Launch(context.Background()))
		ctx, cancel := short()
		defer cancel()
		err = within(t, func() error { return g.Sync(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("Capture", func(t *testing.T) {
		s, err := executor.Open(context.Background(), b, p)
		require.NoError(t, err)
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = s.Capture(ctx)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("Open", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := executor.Open(ctx, b, p)
		require.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, b.Sessions())
	})
	t.Run("cpu.Session.Sync", func(t *testing.T) {
		d, err := b.OpenSession(context.Background(), p.Graph)
		require.NoError(t, err)
		defer d.Close()
		require.NoError(t, d.NewStream(0, 0))
		for _, op := range p.Graph.Ops {
			require.NoError(t, d.Run(0, op))
		}
		ctx, cancel := short()
		defer cancel()
		err = within(t, func() error { return d.Sync(ctx) })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestExecuteTimesOut(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := executor.Execute(ctx, b, spinPlan(t, 400, 10_000))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Zero(t, b.Sessions())
}

// hugePlan is a plan that fills a buffer of size bytes (made with opts) and
// copies 16 bytes of it out.
func hugePlan(t testing.TB, size int64, opts ...dag.BufferOption) *planner.Plan {
	bld := dag.New()
	big := bld.Buffer("big", size, opts...)
	out := bld.Buffer("out", 16, dag.Zeros())
	bld.Fill(big.All(), 1)
	bld.Copy(out.All(), big.Slice(0, 16))
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

func TestMemoryAdmissionRefusesHugeBuffers(t *testing.T) {
	const TiB = int64(1) << 40
	cases := []struct {
		name string
		size int64
		opts []dag.BufferOption
	}{
		{"1 PiB host buffer", 1024 * TiB, []dag.BufferOption{dag.PageableHost()}},
		{"1024 TiB temporary", 1024 * TiB, []dag.BufferOption{dag.Temporary()}},
		{"2 TiB pinned buffer", 2 * TiB, []dag.BufferOption{dag.PinnedHost()}},
		{"200 TiB device buffer", 200 * TiB, nil},
		{"4 EiB device buffer", 1 << 62, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := cpu.New()
			defer b.Close()
			p := hugePlan(t, c.size, c.opts...)
			require.NotPanics(t, func() {
				_, err := executor.Execute(context.Background(), b, p)
				me, ok := errors.AsType[*executor.MemoryError](err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, device.HostMemory, me.Device)
				assert.Equal(t, "big", me.Buffers[0].Name)
				assert.Contains(t, err.Error(), "big (")
				assert.Contains(t, err.Error(), "host memory")
			})
			assert.Zero(t, b.Sessions())
		})
	}
}

// noMemory hides a backend's device.Memory, so that admission control
// lets every plan through and the allocations in the run are the check.
type noMemory struct{ device.Backend }

func TestAllocationBeyondTheHostIsAnOpErrorNamingTheBuffer(t *testing.T) {
	const TiB = int64(1) << 40
	for _, size := range []int64{1024 * TiB, 2 * TiB, 1 << 62} {
		b := cpu.New()
		p := hugePlan(t, size, dag.Temporary())
		require.NotPanics(t, func() {
			_, err := executor.Execute(context.Background(), noMemory{b}, p)
			oe, ok := errors.AsType[*dag.OpError](err)
			require.True(t, ok, "%v", err)
			assert.True(t, strings.HasPrefix(oe.Op, "alloc") || strings.Contains(oe.Err.Error(), "big"), "%v", err)
			assert.Contains(t, err.Error(), "buffer big")
		})
		// A persistent buffer fails Open instead.
		_, err := executor.Execute(context.Background(), noMemory{b}, hugePlan(t, size))
		require.ErrorContains(t, err, "buffer big")
		assert.Zero(t, b.Sessions())
		require.NoError(t, b.Close())
	}
}

func TestMemoryNeedsCountTheLargestLiveSetOfTemporaries(t *testing.T) {
	bld := dag.New()
	p1 := bld.Buffer("persist", 100, dag.Zeros())
	h := bld.Buffer("host", 10, dag.PinnedHost(), dag.Zeros())
	a := bld.Buffer("a", 1000, dag.Temporary())
	c := bld.Buffer("c", 300, dag.Temporary())
	d := bld.Buffer("d", 400, dag.Temporary())
	// a alone (1000), then c and d together (700). Nothing orders the
	// allocs of c and d after the free of a, so a plan may allocate them
	// first: the peak is a, or all three, as the plan submits them.
	bld.Alloc(a)
	bld.Fill(a.All(), 1)
	bld.Copy(p1.All(), a.Slice(0, 100))
	bld.Free(a)
	bld.Alloc(c)
	bld.Alloc(d)
	bld.Fill(c.All(), 1)
	bld.Fill(d.All(), 1)
	bld.Copy(p1.All(), c.Slice(0, 100))
	bld.Copy(h.All(), d.Slice(0, 10))
	bld.Free(c)
	bld.Free(d)
	g, err := bld.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(t, err)

	// The live set, replayed here from the plan's steps.
	var live, peak int64
	for _, st := range p.Steps {
		if st.Kind != planner.Run {
			continue
		}
		switch op := g.Ops[st.Op]; op.Kind {
		case dag.Alloc:
			live += op.Buffer().Size
			peak = max(peak, live)
		case dag.Free:
			live -= op.Buffer().Size
		}
	}
	require.Contains(t, []int64{1000, 1700}, peak)

	needs := executor.MemoryNeeds(p, false)
	require.Len(t, needs, 2)
	assert.Equal(t, device.HostMemory, needs[0].Device)
	assert.Equal(t, int64(10), needs[0].Bytes())
	assert.Equal(t, []string{"host"}, bufferNames(needs[0].Buffers))
	assert.Equal(t, 0, needs[1].Device)
	assert.Equal(t, int64(100), needs[1].Persistent)
	assert.Equal(t, peak, needs[1].Temporary)
	assert.Equal(t, "a", needs[1].Buffers[0].Name)
	assert.Contains(t, bufferNames(needs[1].Buffers), "persist")

	// On the cpu backend everything is host memory.
	needs = executor.MemoryNeeds(p, true)
	require.Len(t, needs, 1)
	assert.Equal(t, 110+peak, needs[0].Bytes())

	// The same peak with everything on two streams at most.
	p2, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	for _, n := range executor.MemoryNeeds(p2, false) {
		if n.Device == 0 {
			assert.GreaterOrEqual(t, n.Temporary, int64(1000))
		}
	}
}

func bufferNames(bs []*dag.Buffer) []string {
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	return names
}

func BenchmarkCheckMemory(b *testing.B) {
	// The admission check against a floor of planning the same graph
	// (the ratio is what BENCHMARKS.md reports), for plans of n ops with
	// a temporary every 8 ops.
	for _, n := range []int{1_000, 100_000} {
		bld := dag.New()
		x := bld.Buffer("x", 1<<20, dag.Zeros())
		for i := range n / 8 {
			t := bld.Buffer(fmt.Sprintf("t%d", i), 1<<10, dag.Temporary())
			bld.Alloc(t)
			bld.Fill(t.All(), 1)
			bld.Copy(x.Slice(int64(i%1024)*1024, 1024), t.All())
			bld.Free(t)
			bld.Fill(x.Slice(0, 1024), 2)
			bld.Fill(x.Slice(1024, 1024), 2)
			bld.Fill(x.Slice(2048, 1024), 2)
			bld.Fill(x.Slice(3072, 1024), 2)
		}
		g, err := bld.Build()
		require.NoError(b, err)
		p, err := planner.New(g)
		require.NoError(b, err)
		be := cpu.New()
		b.Run(fmt.Sprintf("ops=%d/plan", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = planner.New(g)
			}
		})
		b.Run(fmt.Sprintf("ops=%d/MemoryNeeds", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				executor.MemoryNeeds(p, true)
			}
		})
		b.Run(fmt.Sprintf("ops=%d/CheckMemory", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				require.NoError(b, executor.CheckMemory(be, p))
			}
		})
	}
}
