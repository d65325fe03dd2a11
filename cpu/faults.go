package cpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Fault injection (device.Delayer, device.Failer): a pause or a failure
// enqueued on a stream like an op, so it happens in stream order.

var (
	_ device.Delayer = (*Session)(nil)
	_ device.Failer  = (*Session)(nil)
)

const (
	pause instrKind = recordExternal + 1 + iota // a worker sleeps for gen nanoseconds
	fail                                        // the run fails with fault, attributed to op
)

// Delay enqueues a pause of d on stream: a worker sleeps for d (or until
// the run is aborted) before the stream goes on.
func (b *Session) Delay(stream int, d time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(stream, -1); err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("cpu: Delay: negative pause %v", d)
	}
	if b.capturing != nil {
		return errors.New("cpu: Delay: faults cannot be captured in a graph")
	}
	b.enqueue(b.streams[stream], instr{kind: pause, gen: uint64(d)})
	return nil
}

// Fail enqueues a failure on stream: when the stream reaches it, the run
// fails with a *dag.OpError of op and err, and the work after it is
// skipped, as when op fails.
func (b *Session) Fail(stream int, op *dag.Op, err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(stream, -1); err != nil {
		return err
	}
	if op == nil || err == nil {
		return errors.New("cpu: Fail: give the op that fails and its error")
	}
	if b.capturing != nil {
		return errors.New("cpu: Fail: faults cannot be captured in a graph")
	}
	b.enqueue(b.streams[stream], instr{kind: fail, op: op, fault: err})
	return nil
}

// failAt raises the failure of in, unless the run has failed already. It
// runs under the lock, from advance.
func (b *Session) failAt(in instr) {
	if !b.aborted {
		b.abort(&dag.OpError{Op: in.op.Name, Err: in.fault})
	}
}

// stepPause sleeps for the pause at the head of s, without the lock.
func (b *Session) stepPause(w *worker, s *stream) {
	d, done := time.Duration(s.q[s.head].gen), b.runCtx.Done()
	b.mu.Unlock()
	w.pause(d, done)
	b.mu.Lock()
	s.head++
	b.finish()
}

// errClosedInFlight is what a Sync returns when Close ended its run.
var errClosedInFlight = fmt.Errorf("cpu: the session was %w while the run was in flight; its work was skipped", device.ErrClosed)

// wakeSync lets a Sync waiting for work that Close has skipped return.
// It runs under the lock, once the workers have stopped.
func (b *Session) wakeSync() {
	if b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
}
