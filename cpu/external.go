package cpu

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dagrun/dagrun/executor/device"
)

var _ device.ExternalEvents = (*Session)(nil)

// Event is the cpu backend's stand-in for a CUevent that a caller shares
// with dagrun (executor.External): the caller's own work records it and
// dagrun's streams wait for it, or dagrun records it and the caller waits.
// Like a CUevent it counts generations: a wait is for the latest record
// made before it. Make one with Backend.NewEvent and pass its Handle.
type Event struct {
	reg    *eventRegistry
	handle uintptr

	mu       sync.Mutex
	recorded uint64        // records made so far
	reached  uint64        // the latest generation reached
	changed  chan struct{} // closed, and replaced, whenever reached grows
}

// eventRegistry maps the handles of a backend's open events to them.
type eventRegistry struct {
	mu     sync.Mutex
	next   uintptr
	events map[uintptr]*Event
}

// NewEvent makes an event the caller can record and wait on, and hand to
// the sessions of b by its Handle. Close it when done.
func (b *Backend) NewEvent() *Event {
	r := &b.ext
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = map[uintptr]*Event{}
	}
	r.next++
	e := &Event{reg: r, handle: r.next, changed: make(chan struct{})}
	r.events[e.handle] = e
	return e
}

func (r *eventRegistry) lookup(h uintptr) (*Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.events[h]; e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("cpu: event handle %#x is not an open event of this backend; make one with Backend.NewEvent and pass its Handle", h)
}

// Handle is what executor.External takes for e.
func (e *Event) Handle() uintptr { return e.handle }

// Close forgets the event: its handle is no longer accepted.
func (e *Event) Close() {
	e.reg.mu.Lock()
	delete(e.reg.events, e.handle)
	e.reg.mu.Unlock()
}

// Record is the caller's record: its work so far is done, so the new
// generation is reached at once.
func (e *Event) Record() { e.reach(e.begin()) }

// RecordPending is the caller's record of work still under way (the CPU
// form of recording on a busy stream): waits made from now on are over
// once reach is called.
func (e *Event) RecordPending() (reach func()) {
	gen := e.begin()
	return func() { e.reach(gen) }
}

// Query reports whether the latest record is reached.
func (e *Event) Query() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reached >= e.recorded
}

// Wait blocks until the latest record made before it is reached, or ctx
// ends (the CPU form of cuEventSynchronize).
func (e *Event) Wait(ctx context.Context) error {
	e.mu.Lock()
	gen := e.recorded
	e.mu.Unlock()
	for {
		ch, ok := e.over(gen)
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// begin starts a new generation and returns it.
func (e *Event) begin() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recorded++
	return e.recorded
}

// latest is the generation a wait made now waits for.
func (e *Event) latest() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorded
}

func (e *Event) reach(gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen > e.reached {
		e.reached = gen
		close(e.changed)
		e.changed = make(chan struct{})
	}
}

// over reports whether gen is reached and, if not, a channel closed when
// the event next moves.
func (e *Event) over(gen uint64) (<-chan struct{}, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reached >= gen {
		return nil, true
	}
	return e.changed, false
}

// WaitExternal makes the work enqueued on stream after it wait for the
// latest record of the caller's event ev (a *Event's Handle) made so far.
func (b *Session) WaitExternal(stream int, ev uintptr) error {
	return b.sched.enqueueExternal("WaitExternal", stream, ev, waitExternal)
}

// RecordExternal records the caller's event ev (a *Event's Handle) on
// stream: it is reached once the work enqueued on stream before it is done
// (or skipped, when the run fails, so the caller never waits forever).
func (b *Session) RecordExternal(stream int, ev uintptr) error {
	return b.sched.enqueueExternal("RecordExternal", stream, ev, recordExternal)
}

func (sc *scheduler) enqueueExternal(verb string, stream int, ev uintptr, kind instrKind) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if err := sc.checkStep(stream, -1); err != nil {
		return err
	}
	if sc.capt.capturing != nil {
		return fmt.Errorf("cpu: %s: a graph cannot hold the caller's events; order the replay with them instead", verb)
	}
	if sc.ext == nil {
		return errors.New("cpu: " + verb + ": the session has no backend to find the event in")
	}
	e, err := sc.ext.lookup(ev)
	if err != nil {
		return err
	}
	in := instr{kind: kind, ext: e}
	if kind == waitExternal {
		in.gen = e.latest()
	} else {
		in.gen = e.begin()
	}
	sc.enqueue(sc.streams[stream], in)
	return nil
}

// external does an external record or wait at the head of s, under the
// lock, and reports whether s goes on; a wait not yet over blocks s until
// the event moves (or the run ends).
func (sc *scheduler) external(s *stream, in instr) bool {
	if in.kind == recordExternal {
		in.ext.reach(in.gen)
		return true
	}
	if sc.aborted {
		return true
	}
	if _, ok := in.ext.over(in.gen); ok {
		return true
	}
	s.state = blocked
	sc.blocked++
	done := sc.runCtx.Done()
	go func() {
		// The event may move more than once before it reaches gen.
		for {
			ch, ok := in.ext.over(in.gen)
			if ok {
				break
			}
			select {
			case <-ch:
			case <-done:
				return // abort has released the blocked streams
			}
		}
		sc.mu.Lock()
		if sc.blocked > 0 {
			sc.release()
		}
		sc.mu.Unlock()
	}()
	return false
}

// waitOver reports whether the wait at a blocked stream's head is over.
func (sc *scheduler) waitOver(in instr) bool {
	if in.kind == waitExternal {
		_, ok := in.ext.over(in.gen)
		return ok
	}
	return sc.event(in.event).reached >= in.gen
}
