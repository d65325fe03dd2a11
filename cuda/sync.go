package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Synchronisation: waiting for a session's streams, and abandoning a run.

// hostSide is what host steps share with the session: they run on driver
// threads, read hostCtx and report here.
type hostSide struct {
	drv    *driver
	hold   *holdings
	sub    *submitter
	colls  *collectives
	ctl    *controller
	faults *faultState

	hostCtx    context.Context
	hostCancel context.CancelFunc
	abandoned  atomic.Bool
	waiters    sync.WaitGroup // cancellable Syncs' waiters (sync.go)
	hostMu     sync.Mutex
	hostErr    error
}

// Sync does the work of Session.Sync.
func (hst *hostSide) Sync(ctx context.Context) (err error) {
	if err := unopened(hst.drv); err != nil { // faults.go
		return err
	}
	defer func() { hst.faults.afterFailedRun(ctx, err) }() // faults.go
	if hst.colls.heldOn != nil {
		if err := hst.colls.flushP2P(nil, actNone); err != nil {
			return hst.colls.afterSync(ctx, err)
		}
	}
	err = hst.syncStreams(ctx)
	hst.hold.endPoolRuns() // poolwatch.go
	if err == nil && hst.ctl.controls != nil {
		err = hst.ctl.overflowed() // control.go
	}
	return hst.colls.afterSync(ctx, err)
}

// syncStreams is Sync's wait; afterSync (collective.go) aborts the
// communicator when it fails.
func (hst *hostSide) syncStreams(ctx context.Context) error {
	var errs []error
	if ctx.Done() != nil || hst.colls.coll != nil {
		var err error
		if errs, err = hst.syncStreamsCancellable(ctx); err != nil {
			hst.abandon()
			return err
		}
	} else {
		errs = make([]error, len(hst.sub.streams))
		for i := range hst.sub.streams {
			if s := &hst.sub.streams[i]; s.busy {
				errs[i] = hst.drv.check("cuStreamSynchronize", C.dr_stream_sync(hst.drv.api, s.dev.ctx, s.h))
			}
		}
	}
	var first error
	for i, err := range errs {
		if err == nil {
			hst.sub.streams[i].busy = false
		} else if first == nil {
			first = &dag.OpError{Op: hst.sub.streams[i].last, Err: &AsyncError{Stream: i, Err: err}}
		}
	}
	hst.hostMu.Lock()
	herr := hst.hostErr
	hst.hostErr = nil
	hst.hostMu.Unlock()
	if herr != nil {
		return herr
	}
	return first
}

// syncStreamsCancellable waits for every busy stream: for up to syncPolling by
// querying them without pause, then with blocking driver calls
// on a goroutine of their own, so that the run's end wakes the caller at
// once (polling with sleeps overshot by up to a sleep: 3% of a 256 MiB
// all-reduce's time) while ctx can still end the wait and, in a world,
// the collectives are watched every collWatchEvery (collWatch). An
// abandoned waiter finishes when the work does (an aborted communicator's
// kernels return); syncAll waits for it before streams are reused or
// destroyed. It returns each stream's error, or ctx's or the watch's.
func (hst *hostSide) syncStreamsCancellable(ctx context.Context) ([]error, error) {
	type stream struct {
		c C.CUcontext
		h C.CUstream
	}
	api, ss := hst.drv.api, make([]stream, len(hst.sub.streams))
	for i, s := range hst.sub.streams {
		if s.busy {
			ss[i] = stream{s.dev.ctx, s.h}
		}
	}
	// Short waits end here, polled from this goroutine: waking it from a
	// waiter's blocking call costs about 15 us a Sync (the H100: a
	// replay of 8 chains of 20 us took 52 us against a raw graph's 36).
	// The streams are waited for in turn, as the blocking calls below do:
	// each poll asks one stream (and those after it found done), without
	// switching contexts between devices at every query. A stream found
	// done or failed is not asked again (h nil).
	errs := make([]error, len(ss))
	polled := pollUntil(time.Now().Add(syncPolling), func() bool {
		for i, s := range ss {
			if s.h == nil {
				continue
			}
			switch r := C.dr_stream_query(api, s.c, s.h); r {
			case C.DR_ERROR_NOT_READY:
				return ctx.Err() != nil
			case C.DR_SUCCESS:
			default:
				errs[i] = hst.drv.check("cuStreamQuery", r)
			}
			ss[i].h = nil
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if polled {
		return errs, nil
	}
	done := make(chan []error, 1)
	hst.waiters.Add(1)
	go func() {
		defer hst.waiters.Done()
		for i, s := range ss {
			if s.h != nil {
				errs[i] = hst.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, s.c, s.h))
			}
		}
		done <- errs
	}()
	var tick <-chan time.Time
	if hst.colls.coll != nil {
		t := time.NewTicker(collWatchEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case errs := <-done:
			return errs, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick:
			if err := hst.colls.collWatch(); err != nil {
				return nil, err
			}
		}
	}
}

// syncPolling is how long a cancellable Sync polls the streams before it
// waits in blocking calls: what a short run takes, not a long one's CPU.
const syncPolling = time.Millisecond

// pollUntil calls done until it reports true or the deadline passes, and
// reports whether it did.
func pollUntil(deadline time.Time, done func() bool) bool {
	for {
		if done() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// collWatchEvery is how often a Sync in a world asks NCCL for errors and
// checks the collective timeout.
const collWatchEvery = time.Millisecond

// abandon stops host steps that have not started and tells running ones
// through their context.
func (hst *hostSide) abandon() {
	hst.abandoned.Store(true)
	if hst.hostCancel != nil {
		hst.hostCancel()
	}
}

// resume starts a run after an abandoned one: it waits for the abandoned
// work (whose host steps return at once) and gives host steps a fresh
// context.
func (hst *hostSide) resume() error {
	if err := hst.sub.syncAll(); err != nil {
		return fmt.Errorf("waiting for the abandoned run: %w", err)
	}
	hst.hostCtx, hst.hostCancel = context.WithCancel(context.WithoutCancel(hst.hostCtx))
	hst.abandoned.Store(false)
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
