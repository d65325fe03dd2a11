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
	var errs []error
	if ctx.Done() != nil && se.coll == nil {
		var err error
		if errs, err = se.syncStreamsCancellable(ctx); err != nil {
			se.abandon()
			return err
		}
	} else {
		errs = make([]error, len(se.streams))
		for i := range se.streams {
			if errs[i] = se.syncStream(ctx, &se.streams[i]); errs[i] != nil && ctx.Err() != nil {
				se.abandon()
				return ctx.Err()
			}
		}
	}
	var first error
	for i, err := range errs {
		if err != nil && first == nil {
			first = &dag.OpError{Op: se.streams[i].last, Err: &AsyncError{Stream: i, Err: err}}
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

// syncStreamsCancellable waits for every stream with blocking driver calls
// on a goroutine of their own, so that the run's end wakes the caller at
// once (polling with sleeps would overshoot by up to a sleep) while ctx
// can still end the wait. An abandoned waiter finishes when the work does;
// syncAll waits for it before streams are reused or destroyed. It returns
// each stream's error, or ctx's.
func (se *Session) syncStreamsCancellable(ctx context.Context) ([]error, error) {
	type stream struct {
		c C.CUcontext
		h C.CUstream
	}
	api, ss := se.drv.api, make([]stream, len(se.streams))
	for i := range se.streams {
		ss[i] = stream{se.streams[i].dev.ctx, se.streams[i].h}
	}
	done := make(chan []error, 1)
	se.waiters.Add(1)
	go func() {
		defer se.waiters.Done()
		errs := make([]error, len(ss))
		for i, s := range ss {
			errs[i] = se.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, s.c, s.h))
		}
		done <- errs
	}()
	select {
	case errs := <-done:
		return errs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
