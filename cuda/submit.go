package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Submission: enqueueing a plan's steps on a session's streams.

// submitter enqueues a session's work on its streams: it holds the
// streams, the events, and the C records of every op (prepare.go).
type submitter struct {
	drv   *driver
	reuse *recycler // the Backend's: streams and events of closed sessions
	hold  *holdings
	host  *hostSide
	capt  *capturer
	tim   *timer
	colls *collectives
	stage *stager
	gemms *gemmHooks
	ctl   *controller

	ops     []opState // by Op.ID
	streams []stream
	events  []event
	stretch []C.dr_step // Submit's plain steps, reused (stretch.go)
}

// NewStream does the work of Session.NewStream.
func (sm *submitter) NewStream(ordinal int, p dag.Priority) error {
	if err := unopened(sm.drv); err != nil { // faults.go
		return err
	}
	if sm.hold.closed {
		return fmt.Errorf("cuda: NewStream: the session is %w", device.ErrClosed)
	}
	d, err := sm.hold.device(ordinal)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	prio := StreamPriority(p, d.least, d.greatest)
	h, err := sm.reuse.stream(d.ctx, prio)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	sm.streams = append(sm.streams, stream{h: h, dev: d, prio: prio})
	sm.hold.track(&sm.hold.live.Streams, 1)
	return nil
}

// NewEvent does the work of Session.NewEvent.
func (sm *submitter) NewEvent() error {
	if err := unopened(sm.drv); err != nil { // faults.go
		return err
	}
	if sm.hold.closed {
		return fmt.Errorf("cuda: NewEvent: the session is %w", device.ErrClosed)
	}
	sm.events = append(sm.events, event{})
	return nil
}

func (sm *submitter) stream(i int) (*stream, error) {
	if i < 0 || i >= len(sm.streams) {
		return nil, fmt.Errorf("cuda: stream %d does not exist (%d made)", i, len(sm.streams))
	}
	s := &sm.streams[i]
	s.busy = true // whoever asks for a stream may enqueue work on it
	return s, nil
}

func (sm *submitter) event(i int) (*event, error) {
	if i < 0 || i >= len(sm.events) {
		return nil, fmt.Errorf("cuda: event %d does not exist (%d made)", i, len(sm.events))
	}
	return &sm.events[i], nil
}

// Record does the work of Session.Record.
func (sm *submitter) Record(si, ei int) error {
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if sm.host.abandoned.Load() {
		if err := sm.host.resume(); err != nil {
			return err
		}
	}
	e, err := sm.event(ei)
	if err != nil {
		return err
	}
	if e.dev != s.dev {
		if e.h != nil {
			if err := sm.reuse.putEvent(e.dev.ctx, e.h); err != nil {
				return err
			}
			e.h = nil
			sm.hold.track(&sm.hold.live.Events, -1)
		}
		if e.h, err = sm.reuse.event(s.dev.ctx); err != nil {
			return fmt.Errorf("event %d: %w", ei, err)
		}
		e.dev = s.dev
		sm.hold.track(&sm.hold.live.Events, 1)
	}
	if sm.colls.heldOn != nil {
		if err := sm.colls.flushP2P(s, actNone); err != nil {
			return err
		}
	}
	return sm.drv.check("cuEventRecord", C.dr_record(sm.drv.api, s.dev.ctx, e.h, s.h))
}

// Wait does the work of Session.Wait.
func (sm *submitter) Wait(si, ei int) error {
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if sm.host.abandoned.Load() {
		if err := sm.host.resume(); err != nil {
			return err
		}
	}
	e, err := sm.event(ei)
	if err != nil {
		return err
	}
	if e.h == nil {
		// Never recorded: the wait is for nothing, as cuStreamWaitEvent
		// on an event with no record, and as the device contract says.
		return nil
	}
	if sm.colls.heldOn != nil {
		if err := sm.colls.flushP2P(s, actNone); err != nil {
			return err
		}
	}
	return sm.drv.check("cuStreamWaitEvent", C.dr_wait(sm.drv.api, s.dev.ctx, s.h, e.h))
}

// Run does the work of Session.Run.
func (sm *submitter) Run(si int, op *dag.Op) error {
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if op == nil || op.ID < 0 || opSlot(op) >= len(sm.ops) {
		return fmt.Errorf("cuda: op %v is not an op of the open graph", op)
	}
	st := &sm.ops[opSlot(op)]
	if st.op != op {
		v, err := sm.capt.variant(op)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		st = v
		if st.launch != nil && st.work == nil && st.act != actHostFunc {
			// The driver copies kernel arguments at the launch.
			defer sm.capt.dropVariant(st)
		}
	}
	if sm.host.abandoned.Load() {
		if err := sm.host.resume(); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	if sm.tim.tracesOps() { // timing.go
		s.last = op.Name
		if err := sm.tim.cupti.runTraced(sm, s, si, st, op); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		return nil
	}
	// An op is timed by events of its own before and after it, not by the
	// end of the op before it: that would hide the gaps where the device
	// waits for the host (BENCHMARKS.md has the figures).
	var start C.CUevent
	if sm.tim.timing {
		if start, err = sm.tim.timingRecord(s); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	s.last = op.Name
	if err := sm.run(s, st); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	if sm.tim.timing {
		end, err := sm.tim.timingRecord(s)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		sm.tim.timed = append(sm.tim.timed, timedOp{op: opSlot(op), stream: si, dev: s.dev, start: start, end: end})
	}
	return nil
}

// bindSlots writes the device addresses of st's buffers, as they are now,
// into its launch's arguments.
func (sm *submitter) bindSlots(st *opState) error {
	for _, p := range st.slots {
		bs := &sm.hold.bufs[p.buf]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		*p.slot = uint64(bs.dptr) + uint64(p.offset)
	}
	return nil
}

// ptr is the device address of view v now.
func (hd *holdings) ptr(v dag.View) C.CUdeviceptr {
	return hd.bufs[v.Buf.ID].dptr + C.CUdeviceptr(v.Offset)
}

func (hd *holdings) hostPtr(v dag.View) unsafe.Pointer {
	return unsafe.Add(hd.bufs[v.Buf.ID].host, v.Offset)
}

// freeRecords frees the C records of the session's ops (Close).
func (sm *submitter) freeRecords() {
	for i := range sm.ops {
		st := &sm.ops[i]
		if st.launch != nil {
			C.free(unsafe.Pointer(st.launch))
			sm.hold.track(&sm.hold.live.HostAllocs, -1)
		}
		if st.work != nil {
			C.free(unsafe.Pointer(st.work))
			sm.hold.track(&sm.hold.live.HostAllocs, -1)
		}
		if st.act == actHostFunc && st.handle != 0 {
			st.handle.Delete()
			sm.hold.track(&sm.hold.live.Callbacks, -1)
		}
	}
}

// destroyStreams gives the session's streams and events back to the Backend
// for the next sessions when the close is clean, or destroys them (Close).
func (sm *submitter) destroyStreams(keep func(error), clean bool) {
	for _, s := range sm.streams {
		if clean {
			keep(sm.reuse.putStream(s.dev.ctx, s.prio, s.h))
		} else {
			keep(sm.drv.streams.destroy(s.dev.ctx, s.h))
		}
		sm.hold.track(&sm.hold.live.Streams, -1)
	}
	for _, e := range sm.events {
		if e.h == nil {
			continue
		}
		if clean {
			keep(sm.reuse.putEvent(e.dev.ctx, e.h))
		} else {
			keep(sm.drv.events.destroy(e.dev.ctx, e.h))
		}
		sm.hold.track(&sm.hold.live.Events, -1)
	}
}
