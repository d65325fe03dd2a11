package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"sync"
)

// recycler keeps the streams and the events of closed sessions for the
// next sessions of a Backend. Making them costs a driver call each, and a
// session opened for a new shape (executor.Shapes) makes a few streams and
// dozens of events before its first run. A stream comes back only from a
// session that closed cleanly: its work done (Close synchronised it), no
// capture open on it. An event is taken at its first record, which
// overwrites whatever an earlier session recorded on it. Each is kept in
// its context, a stream by its priority; beyond the bounds they are
// destroyed, and Backend.Close destroys the rest.
type recycler struct {
	drv *driver

	mu      sync.Mutex // guards what follows
	streams map[recycledStream][]C.CUstream
	events  map[C.CUcontext][]C.CUevent
	held    int  // streams and events kept
	closed  bool // by close: what comes back after it is destroyed
}

// recycledStream is what a kept stream is found by.
type recycledStream struct {
	ctx  C.CUcontext
	prio int
}

// Bounds on what a recycler keeps, per context (and priority): more than
// the sessions of one shape use, for a few shapes in turn.
const (
	recycleStreams = 64
	recycleEvents  = 4096
)

func newRecycler(drv *driver) *recycler {
	return &recycler{drv: drv, streams: map[recycledStream][]C.CUstream{}, events: map[C.CUcontext][]C.CUevent{}}
}

// stream is a stream of priority prio in c: one kept, or a new one.
func (r *recycler) stream(c C.CUcontext, prio int) (C.CUstream, error) {
	if s, ok := takeKept(r, r.streams, recycledStream{c, prio}); ok {
		return s, nil
	}
	return r.drv.streams.create(c, prio)
}

// event is an event without timing in c: one kept, or a new one.
func (r *recycler) event(c C.CUcontext) (C.CUevent, error) {
	if e, ok := takeKept(r, r.events, c); ok {
		return e, nil
	}
	return r.drv.events.create(c, false)
}

// putStream keeps s, of priority prio in c, idle and out of any capture,
// or destroys it beyond the bound.
func (r *recycler) putStream(c C.CUcontext, prio int, s C.CUstream) error {
	if addKept(r, r.streams, recycledStream{c, prio}, s, recycleStreams) {
		return nil
	}
	return r.drv.streams.destroy(c, s)
}

// putEvent keeps e, an event without timing in c, or destroys it beyond
// the bound.
func (r *recycler) putEvent(c C.CUcontext, e C.CUevent) error {
	if addKept(r, r.events, c, e, recycleEvents) {
		return nil
	}
	return r.drv.events.destroy(c, e)
}

// takeKept takes the last of what r keeps in kept[k], if any.
func takeKept[K comparable, V any](r *recycler, kept map[K][]V, k K) (v V, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(kept[k]); n > 0 {
		v, kept[k] = kept[k][n-1], kept[k][:n-1]
		r.held--
		return v, true
	}
	return v, false
}

// addKept adds v to kept[k] unless r is closed or kept[k] holds bound.
func addKept[K comparable, V any](r *recycler, kept map[K][]V, k K, v V, bound int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(kept[k]) >= bound {
		return false
	}
	kept[k] = append(kept[k], v)
	r.held++
	return true
}

// kept is the number of streams and events kept.
func (r *recycler) kept() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// close destroys everything kept, and whatever comes back later; the
// contexts must still be retained.
func (r *recycler) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for k, kept := range r.streams {
		for _, s := range kept {
			if err := r.drv.streams.destroy(k.ctx, s); err != nil {
				errs = append(errs, err)
			}
		}
		delete(r.streams, k)
	}
	for c, kept := range r.events {
		for _, e := range kept {
			if err := r.drv.events.destroy(c, e); err != nil {
				errs = append(errs, err)
			}
		}
		delete(r.events, c)
	}
	r.held = 0
	return errors.Join(errs...)
}
