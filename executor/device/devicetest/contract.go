package devicetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
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
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
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
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
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
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
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
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
		fill = b.Fill(x.All(), 4)
	})
	ds := s.session(t, g, 1, 1)
	require.NoError(t, ds.Wait(0, 0))
	require.NoError(t, ds.Run(0, fill))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(4, 4), readF32(t, ds, x))
}

// opErrors: an op that fails makes Sync return a *dag.OpError naming it
// and wrapping its error; the work after it on its stream is skipped;
// the session takes the next run.
func (s *suite) opErrors(t *testing.T) {
	boom := errors.New("the host step failed on purpose")
	var x *dag.Buffer
	var fail, scale *dag.Op
	failing := true
	g := build(t, func(b *dag.Builder) {
		h := b.Buffer("h", 4, dag.PinnedHost(), dag.Of(dag.F32))
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		fail = b.Host(func(context.Context, [][]byte) error {
			if failing {
				return boom
			}
			return nil
		}, dag.InOut(h.All()))
		fail.Name = "failing"
		scale = b.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
	})
	ds := s.session(t, g, 1, 0)
	require.NoError(t, ds.Run(0, fail))
	require.NoError(t, ds.Run(0, scale))
	err := s.sync(t, ds)
	require.Error(t, err)
	assert.ErrorIs(t, err, boom)
	oe, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "Sync's error %v is a *dag.OpError", err)
	assert.Equal(t, "failing", oe.Op)
	assert.Equal(t, repeat(1, 4), readF32(t, ds, x), "the scale after the failed step was skipped")

	failing = false
	require.NoError(t, ds.Run(0, fail))
	require.NoError(t, ds.Run(0, scale))
	require.NoError(t, s.sync(t, ds), "the session takes the next run")
	assert.Equal(t, repeat(2, 4), readF32(t, ds, x))
}

// faults: Fail stops a run at its place, naming the op; Delay pauses its
// stream and nothing else changes.
func (s *suite) faults(t *testing.T) {
	var x *dag.Buffer
	var fill, scale *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32))
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
		assert.Equal(t, repeat(3, 4), readF32(t, ds, x), "the fill before the failure ran, the scale after it did not")
		require.NoError(t, ds.Run(0, scale))
		require.NoError(t, s.sync(t, ds), "the session takes the next run")
		assert.Equal(t, repeat(6, 4), readF32(t, ds, x))
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

// closeDuringWork: Close, from another goroutine while work is queued
// and the submitting goroutine is in Sync, returns; the run ends with an
// error or completes, and nothing hangs.
func (s *suite) closeDuringWork(t *testing.T) {
	var x *dag.Buffer
	var spins []*dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4, dag.OnDevice(0), dag.Of(dag.F32))
		for range 50 {
			spins = append(spins, b.Launch(dag.Spin, one, one, float64(spinUS)))
		}
		b.Fill(x.All(), 1)
	})
	b := s.backend(t, s.open)
	ds, err := b.Open(s.ctx(t), g)
	require.NoError(t, err)
	require.NoError(t, ds.NewStream(0, dag.Normal))
	started := make(chan struct{})
	var runErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, op := range spins {
			if i == 1 {
				close(started)
			}
			if runErr = ds.Run(0, op); runErr != nil {
				return
			}
		}
		runErr = ds.Sync(context.Background())
	}()
	<-started
	time.Sleep(5 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- ds.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err, "Close during work")
	case <-time.After(s.timeout):
		t.Fatalf("Close did not return within %v", s.timeout)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.timeout):
		t.Fatalf("the run did not return within %v of Close", s.timeout)
	}
	// All 50 spins take a second; Close came after the first two.
	assert.Error(t, runErr, "the run that Close ended reports an error")
	_, err = ds.Read(x)
	assert.Error(t, err, "Read after Close")
	assert.NoError(t, ds.Close(), "a second Close")
}
