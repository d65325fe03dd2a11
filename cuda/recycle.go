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
	k := recycledStream{c, prio}
	r.mu.Lock()
	if kept := r.streams[k]; len(kept) > 0 {
		s := kept[len(kept)-1]
		r.streams[k] = kept[:len(kept)-1]
		r.held--
		r.mu.Unlock()
		return s, nil
	}
	r.mu.Unlock()
	return r.drv.streams.create(c, prio)
}

// event is an event without timing in c: one kept, or a new one.
func (r *recycler) event(c C.CUcontext) (C.CUevent, error) {
	r.mu.Lock()
	if kept := r.events[c]; len(kept) > 0 {
		e := kept[len(kept)-1]
		r.events[c] = kept[:len(kept)-1]
		r.held--
		r.mu.Unlock()
		return e, nil
	}
	r.mu.Unlock()
	return r.drv.events.create(c, false)
}

// putStream keeps s, of priority prio in c, idle and out of any capture,
// or destroys it beyond the bound.
func (r *recycler) putStream(c C.CUcontext, prio int, s C.CUstream) error {
	k := recycledStream{c, prio}
	r.mu.Lock()
	if !r.closed && len(r.streams[k]) < recycleStreams {
		r.streams[k] = append(r.streams[k], s)
		r.held++
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	return r.drv.streams.destroy(c, s)
}

// putEvent keeps e, an event without timing in c, or destroys it beyond
// the bound.
func (r *recycler) putEvent(c C.CUcontext, e C.CUevent) error {
	r.mu.Lock()
	if !r.closed && len(r.events[c]) < recycleEvents {
		r.events[c] = append(r.events[c], e)
		r.held++
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	return r.drv.events.destroy(c, e)
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
