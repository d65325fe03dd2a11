package devicetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// spinUS is how long the spin kernels of the ordering cases last, in
// microseconds: long enough that a backend ignoring an order would be
// caught reading too early.
const spinUS = 20000

var one = dag.Grid1(1)

// streamOrder: the ops of one stream run in the order they were
// enqueued, a slow op included, and two streams do not disturb each
// other's buffers.
func (s *suite) streamOrder(t *testing.T) {
	var x, y *dag.Buffer
	var ops []*dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		ops = []*dag.Op{
			b.Fill(x.All(), 1),
			b.Launch(dag.Spin, one, one, float64(spinUS)),
			b.Launch(dag.Scale, one, dag.Threads(4), x, float32(3)),
			b.Launch(dag.Axpy, one, dag.Threads(4), x, x, float32(1)),
			b.Fill(y.All(), 5),
			b.Launch(dag.Scale, one, dag.Threads(4), y, float32(2)),
		}
	})
	ds := s.session(t, g, 2, 0)
	for _, op := range ops[:4] {
		require.NoError(t, ds.Run(0, op))
	}
	for _, op := range ops[4:] {
		require.NoError(t, ds.Run(1, op))
	}
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(6, 4), readF32(t, ds, x), "fill 1, spin, scale by 3, add itself, in stream order")
	assert.Equal(t, repeat(10, 4), readF32(t, ds, y), "the other stream's fill 5 and scale by 2")

	// The session takes the next run, in the same order.
	for _, op := range ops[2:4] {
		require.NoError(t, ds.Run(0, op))
	}
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(36, 4), readF32(t, ds, x), "a second run of scale and add on the results of the first")
}

// eventGenerations: a wait waits for the latest record enqueued before
// it, not for an earlier generation of the same event.
func (s *suite) eventGenerations(t *testing.T) {
	var x, y *dag.Buffer
	var fill, spin, scale, cp *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 1)
		spin = b.Launch(dag.Spin, one, one, float64(spinUS))
		scale = b.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
		cp = b.Copy(y.All(), x.All())
	})
	ds := s.session(t, g, 2, 1)
	require.NoError(t, ds.Run(0, fill))
	require.NoError(t, ds.Record(0, 0)) // generation 1: x is 1
	require.NoError(t, ds.Run(0, spin))
	require.NoError(t, ds.Run(0, scale))
	require.NoError(t, ds.Record(0, 0)) // generation 2: x is 2
	require.NoError(t, ds.Wait(1, 0))
	require.NoError(t, ds.Run(1, cp))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(2, 4), readF32(t, ds, y), "the copy waited for the second record, after the scale")
}

// waitForPastGeneration: a wait enqueued between two records of an event
// waits for the first only. Here the second record can only happen
// after the waiting stream goes on, so a backend that waited for the
// second would hang.
func (s *suite) waitForPastGeneration(t *testing.T) {
	var x, y *dag.Buffer
	var fill, cp, refill *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 1)
		cp = b.Copy(y.All(), x.All())
		refill = b.Fill(x.All(), 7)
	})
	ds := s.session(t, g, 2, 2)
	require.NoError(t, ds.Run(0, fill))
	require.NoError(t, ds.Record(0, 0)) // e0, generation 1
	require.NoError(t, ds.Wait(1, 0))   // waits for generation 1
	require.NoError(t, ds.Run(1, cp))
	require.NoError(t, ds.Record(1, 1)) // e1: the copy is done
	require.NoError(t, ds.Wait(0, 1))
	require.NoError(t, ds.Run(0, refill))
	require.NoError(t, ds.Record(0, 0)) // e0, generation 2, after the copy
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(1, 4), readF32(t, ds, y), "the copy ran after the first fill and before the second")
	assert.Equal(t, repeat(7, 4), readF32(t, ds, x))
}

// waitNeverRecorded: waiting on an event never recorded waits for nothing.
func (s *suite) waitNeverRecorded(t *testing.T) {
	var x *dag.Buffer
	var fill *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 4)
	})
	ds := s.session(t, g, 1, 1)
	require.NoError(t, ds.Wait(0, 0))
	require.NoError(t, ds.Run(0, fill))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(4, 4), readF32(t, ds, x))
}

// opErrors: an op that fails makes Sync return a *dag.OpError naming it
// and wrapping its error, and the session takes the next run. What the
// failed run left in its buffers is not checked: a device may still run
// the kernels queued after a failed host step.
func (s *suite) opErrors(t *testing.T) {
	boom := errors.New("the host step failed on purpose")
	var x *dag.Buffer
	var fill, fail, scale *dag.Op
	var failing atomic.Bool
	failing.Store(true)
	g := build(t, func(b *dag.Builder) {
		h := b.Buffer("h", 4, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 1)
		fail = b.Host(func(context.Context, [][]byte) error {
			if failing.Load() {
				return boom
			}
			return nil
		}, dag.InOut(h.All()))
		fail.Name = "failing"
		scale = b.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
	})
	ds := s.session(t, g, 1, 0)
	for _, op := range []*dag.Op{fill, fail, scale} {
		require.NoError(t, ds.Run(0, op))
	}
	err := s.sync(t, ds)
	require.Error(t, err)
	assert.ErrorIs(t, err, boom)
	oe, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "Sync's error %v is a *dag.OpError", err)
	assert.Equal(t, "failing", oe.Op)

	failing.Store(false)
	for _, op := range []*dag.Op{fill, fail, scale} {
		require.NoError(t, ds.Run(0, op))
	}
	require.NoError(t, s.sync(t, ds), "the session takes the next run")
	assert.Equal(t, repeat(2, 4), readF32(t, ds, x))
}

// faults: Fail fails a run at its place, naming the op; Delay pauses its
// stream and nothing else changes.
func (s *suite) faults(t *testing.T) {
	var x *dag.Buffer
	var fill, scale *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 3)
		scale = b.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
	})
	t.Run("Failer", func(t *testing.T) {
		ds := s.session(t, g, 1, 0)
		f := capability[device.Failer](t, ds)
		boom := errors.New("injected")
		require.NoError(t, ds.Run(0, fill))
		require.NoError(t, f.Fail(0, scale, boom))
		require.NoError(t, ds.Run(0, scale))
		err := s.sync(t, ds)
		require.ErrorIs(t, err, boom)
		oe, ok := errors.AsType[*dag.OpError](err)
		require.True(t, ok, "Sync's error %v is a *dag.OpError", err)
		assert.Equal(t, scale.Name, oe.Op)
		require.NoError(t, ds.Run(0, fill))
		require.NoError(t, ds.Run(0, scale))
		require.NoError(t, s.sync(t, ds), "the session takes the next run")
		assert.Equal(t, repeat(6, 4), readF32(t, ds, x))
	})
	t.Run("FailerWithTemporary", func(t *testing.T) {
		// A run that fails after allocating a temporary skips its Free:
		// the session drops it, and the next run allocates it again.
		var y *dag.Buffer
		var ops []*dag.Op
		tg := build(t, func(b *dag.Builder) {
			tmp := b.Buffer("tmp", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Temporary())
			y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
			b.Fill(tmp.All(), 5)
			b.Copy(y.All(), tmp.All())
		})
		ops = tg.Ops // alloc, fill, copy, free
		require.Len(t, ops, 4)
		ds := s.session(t, tg, 1, 0)
		f := capability[device.Failer](t, ds)
		boom := errors.New("injected")
		require.NoError(t, ds.Run(0, ops[0]))
		require.NoError(t, ds.Run(0, ops[1]))
		require.NoError(t, f.Fail(0, ops[2], boom))
		require.ErrorIs(t, s.sync(t, ds), boom)
		for _, op := range ops {
			require.NoError(t, ds.Run(0, op), "op %s of the run after the failed one", op.Name)
		}
		require.NoError(t, s.sync(t, ds), "the session takes the next run, its temporary allocated again")
		assert.Equal(t, repeat(5, 4), readF32(t, ds, y))
	})
	t.Run("Delayer", func(t *testing.T) {
		ds := s.session(t, g, 1, 0)
		d := capability[device.Delayer](t, ds)
		const pause = 20 * time.Millisecond
		start := time.Now()
		require.NoError(t, d.Delay(0, pause))
		require.NoError(t, ds.Run(0, fill))
		require.NoError(t, s.sync(t, ds))
		assert.GreaterOrEqual(t, time.Since(start), pause, "Sync returned before the delay ended")
		assert.Equal(t, repeat(3, 4), readF32(t, ds, x))
	})
}

// write: Write overwrites a persistent buffer between runs, and refuses
// data of another size.
func (s *suite) write(t *testing.T) {
	var x *dag.Buffer
	var scale *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*2, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		scale = b.Launch(dag.Scale, one, dag.Threads(2), x, float32(3))
	})
	ds := s.session(t, g, 1, 0)
	w := capability[device.Writer](t, ds)
	five := dag.ElemBytes(dag.F32, 5)
	assert.Error(t, w.Write(x, five), "a write of 4 bytes into 8")
	require.NoError(t, w.Write(x, append(five, five...)))
	require.NoError(t, ds.Run(0, scale))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(15, 2), readF32(t, ds, x))
}

// shared: a session opened over another's buffer (MemorySharer) uses its
// first bytes: it reads what the owner holds, and its ops change the
// owner's contents; closing it leaves the owner's buffer as it was.
func (s *suite) shared(t *testing.T) {
	var big, small *dag.Buffer
	var scale *dag.Op
	owner := build(t, func(b *dag.Builder) {
		big = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(2))
		b.Launch(dag.Scale, one, dag.Threads(4), big, float32(1))
	})
	g := build(t, func(b *dag.Builder) {
		small = b.Buffer("x", 4*2, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(7))
		scale = b.Launch(dag.Scale, one, dag.Threads(2), small, float32(3))
	})
	b := s.backend(t, s.open)
	sharer := capability[device.MemorySharer](t, b)
	own, err := b.Open(s.ctx(t), owner)
	skipUnsupported(t, err)
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Close()) }()
	ds, err := sharer.OpenShared(s.ctx(t), g, own, device.Shared{Buffers: []*dag.Buffer{big}})
	require.NoError(t, err)
	assert.Equal(t, repeat(2, 2), readF32(t, ds, small), "the owner's contents, not the session's own initial ones")
	require.NoError(t, ds.NewStream(0, dag.Normal))
	require.NoError(t, ds.Run(0, scale))
	require.NoError(t, s.sync(t, ds))
	require.NoError(t, ds.Close())
	assert.Equal(t, []float32{6, 6, 2, 2}, readF32(t, own, big), "the session's op changed the owner's first bytes")
	_, err = sharer.OpenShared(s.ctx(t), build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 4*8, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		b.Launch(dag.Scale, one, one, x, float32(1))
	}), own, device.Shared{Buffers: []*dag.Buffer{big}})
	assert.Error(t, err, "a buffer larger than the owner's")
}

// closeDuringWork: Close with work queued waits for it and releases the
// session, whose calls then fail; an executor session closed from another
// goroutine during a run ends the run with an error. Nothing hangs.
func (s *suite) closeDuringWork(t *testing.T) {
	var x *dag.Buffer
	var spins []*dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		for range 20 {
			spins = append(spins, b.Launch(dag.Spin, one, one, float64(spinUS)))
		}
		b.Fill(x.All(), 1)
	})
	t.Run("Queued", func(t *testing.T) {
		b := s.backend(t, s.open)
		ds, err := b.Open(s.ctx(t), g)
		require.NoError(t, err)
		require.NoError(t, ds.NewStream(0, dag.Normal))
		for _, op := range spins {
			require.NoError(t, ds.Run(0, op))
		}
		within(t, s.timeout, "Close with work queued", func() { assert.NoError(t, ds.Close()) })
		_, err = ds.Read(x)
		assert.Error(t, err, "Read after Close")
		assert.Error(t, ds.Run(0, spins[0]), "Run after Close")
		assert.NoError(t, ds.Close(), "a second Close")
	})
	t.Run("RunInFlight", func(t *testing.T) {
		p, err := planner.New(g, planner.Streams(1))
		require.NoError(t, err)
		b := s.backend(t, s.open)
		es, err := executor.Open(s.ctx(t), b, p)
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- es.Run(context.Background()) }()
		time.Sleep(30 * time.Millisecond) // the run is in its spins
		within(t, s.timeout, "Close during a run", func() { assert.NoError(t, es.Close()) })
		select {
		case err := <-ran:
			assert.Error(t, err, "the run that Close ended reports an error")
		case <-time.After(s.timeout):
			t.Fatalf("the run did not return within %v of Close", s.timeout)
		}
	})
}

// within runs f, failing t when it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}
