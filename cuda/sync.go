package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Synchronisation: waiting for a session's streams, and abandoning a run.

// Sync waits for every stream. With a context that can end it polls, so
// that cancellation returns at once; the work then runs on (a GPU cannot be
// interrupted), host steps not yet started are skipped, and the next run's
// first call, or Close, waits for it.
//
// Errors: a host step's error names its op. A fault that the driver reports
// asynchronously (an illegal address, say) is attributed to the last op run
// on the stream that reported it: the driver says which context failed, not
// which kernel, so the cause may be an earlier op.
func (se *Session) Sync(ctx context.Context) (err error) {
	if err := se.unopened(); err != nil { // faults.go
		return err
	}
	defer func() { se.afterFailedRun(ctx, err) }() // faults.go
	if err := se.flushP2P(nil, actNone); err != nil {
		return se.afterSync(ctx, err)
	}
	return se.afterSync(ctx, se.syncStreams(ctx))
}

// syncStreams is Sync's wait; afterSync (collective.go) aborts the
// communicator when it fails.
func (se *Session) syncStreams(ctx context.Context) error {
	var first error
	for i := range se.streams {
		s := &se.streams[i]
		if err := se.syncStream(ctx, s); err != nil {
			if ctx.Err() != nil {
				se.abandon()
				return ctx.Err()
			}
			if first == nil {
				first = &dag.OpError{Op: s.last, Err: &AsyncError{Stream: i, Err: err}}
			}
		}
	}
	se.hostMu.Lock()
	herr := se.hostErr
	se.hostErr = nil
	se.hostMu.Unlock()
	if herr != nil {
		return herr
	}
	return first
}

func (se *Session) syncStream(ctx context.Context, s *stream) error {
	api, c, h := se.drv.api, s.dev.ctx, s.h
	done := ctx.Done()
	if done == nil && se.coll == nil {
		return se.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h))
	}
	pause := time.Duration(0)
	for {
		r := C.dr_stream_query(api, c, h)
		if r != codeNotReady {
			return se.drv.check("cuStreamQuery", r)
		}
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		if err := se.collWatch(); err != nil {
			return err
		}
		// Spin briefly (short runs end within microseconds), then back off
		// to sleeps of up to a millisecond.
		if pause == 0 {
			for range 64 {
				runtime.Gosched()
				if C.dr_stream_query(api, c, h) != codeNotReady {
					break
				}
			}
			pause = 20 * time.Microsecond
			continue
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// abandon stops host steps that have not started and tells running ones
// through their context.
func (se *Session) abandon() {
	se.abandoned.Store(true)
	if se.hostCancel != nil {
		se.hostCancel()
	}
}

// resume starts a run after an abandoned one: it waits for the abandoned
// work (whose host steps return at once) and gives host steps a fresh
// context.
func (se *Session) resume() error {
	if err := se.syncAll(); err != nil {
		return fmt.Errorf("waiting for the abandoned run: %w", err)
	}
	se.hostCtx, se.hostCancel = context.WithCancel(context.WithoutCancel(se.hostCtx))
	se.abandoned.Store(false)
	return nil
}

// AsyncError is a fault the driver reported for a stream after the ops were
// enqueued.
type AsyncError struct {
	Stream int
	Err    error
}

func (e *AsyncError) Error() string {
	return fmt.Sprintf("%v (reported asynchronously by stream %d after this op, the last on it; an earlier op may have caused it)", e.Err, e.Stream)
}

func (e *AsyncError) Unwrap() error { return e.Err }
