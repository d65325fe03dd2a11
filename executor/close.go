package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dagrun/dagrun/executor/device"
)

// errClosedDuringRun is the cause a run in flight ends with when its
// session is closed from another goroutine.
var errClosedDuringRun = fmt.Errorf("executor: the session was %w during the run", device.ErrClosed)

// inflight is the eager run in flight, so that Session.Close, called from
// another goroutine, can end it: Close cancels the run's context (the
// submission stops, the backend abandons what it waits for), waits for
// Run to return, and only then closes the device session, whose Close
// waits for the work already queued on the device and releases it all.
type inflight struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc // nil when no run is in flight
	done   chan struct{}           // closed when the run in flight returns
}

// begin starts a run (verb: "Run", "Capture", a Graph's "Launch"...) under
// ctx, unless the session is closed or another call is in flight. end,
// which the run defers, says in *err that the session was closed, if it
// was.
func (f *inflight) begin(ctx context.Context, closed *atomic.Bool, verb string) (context.Context, func(*error), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if closed.Load() {
		return nil, nil, fmt.Errorf("executor: %s: session is %w", verb, device.ErrClosed)
	}
	if f.cancel != nil {
		return nil, nil, fmt.Errorf("executor: %s: %w: another call of the session or of its graphs is in flight; a Session and its Graphs run from one goroutine at a time", verb, device.ErrBusy)
	}
	return f.take(ctx)
}

// hold waits for the call in flight, if any, to return, and then takes
// its place (closed or not): Close's way in.
func (f *inflight) hold(ctx context.Context) (context.Context, func(*error)) {
	for {
		f.mu.Lock()
		if f.cancel == nil {
			runCtx, end, _ := f.take(ctx)
			f.mu.Unlock()
			return runCtx, end
		}
		done := f.done
		f.mu.Unlock()
		<-done
	}
}

// take starts a call; the caller holds f.mu.
func (f *inflight) take(ctx context.Context) (context.Context, func(*error), error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	f.cancel, f.done = cancel, make(chan struct{})
	end := func(err *error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if *err != nil && errors.Is(context.Cause(runCtx), errClosedDuringRun) {
			*err = fmt.Errorf("%w: %w", errClosedDuringRun, *err)
		}
		cancel(nil)
		close(f.done)
		f.cancel, f.done = nil, nil
	}
	return runCtx, end, nil
}

// stop ends the run in flight, if any, and waits for it to return.
func (f *inflight) stop() {
	f.mu.Lock()
	cancel, done := f.cancel, f.done
	f.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel(errClosedDuringRun)
	<-done
}
