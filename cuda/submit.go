package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Submission: enqueueing a plan's steps on a session's streams.

// NewStream does the work of Session.NewStream.
func (sm *submitter) NewStream(ordinal int, p dag.Priority) error {
	if err := unopened(sm.drv); err != nil { // faults.go
		return err
	}
	if sm.hold.closed {
		return errors.New("cuda: NewStream: the session is closed")
	}
	d, err := sm.hold.device(ordinal)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	h, err := sm.drv.streamCreate(d.ctx, StreamPriority(p, d.least, d.greatest))
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	sm.streams = append(sm.streams, stream{h: h, dev: d})
	sm.hold.track(&sm.hold.live.Streams, 1)
	return nil
}

// NewEvent does the work of Session.NewEvent.
func (sm *submitter) NewEvent() error {
	if err := unopened(sm.drv); err != nil { // faults.go
		return err
	}
	if sm.hold.closed {
		return errors.New("cuda: NewEvent: the session is closed")
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
			if err := sm.drv.eventDestroy(e.dev.ctx, e.h); err != nil {
				return err
			}
			e.h = nil
			sm.hold.track(&sm.hold.live.Events, -1)
		}
		if e.h, err = sm.drv.eventCreate(s.dev.ctx, false); err != nil {
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
		return fmt.Errorf("cuda: stream %d waits for event %d, which was never recorded", si, ei)
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

// run makes the driver call (one cgo call, two for pageable uploads) that
// enqueues st on s.
func (sm *submitter) run(s *stream, st *opState) error {
	api, c, h := sm.drv.api, s.dev.ctx, s.h
	op := st.op
	if sm.colls.heldOn != nil {
		if err := sm.colls.flushP2P(s, st.act); err != nil {
			return err
		}
	}
	switch st.act {
	case actNone:
		return nil
	case actGemm:
		return sm.gemms.runGemm(s, op)
	case actTask:
		return sm.runTask(s, st)
	case actCollective:
		return sm.colls.runCollective(s, st)
	case actCopyViaHost:
		return sm.stage.runViaHost(s, st)
	case actMemset2D:
		return sm.runMemset2D(s, st)
	case actControl:
		return sm.ctl.run(s, op)
	case actLaunch, actFill64:
		if err := sm.bindSlots(st); err != nil {
			return err
		}
		return sm.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, c, st.launch, h))
	case actAllocDevice:
		bs := &sm.hold.bufs[op.Buffer().ID]
		if bs.dptr != 0 {
			return fmt.Errorf("temporary buffer %s is already allocated", bs.b.Name)
		}
		if sm.capt.capture == nil && sm.ctl.building == 0 {
			sm.hold.watchPool(s.dev) // poolwatch.go; a capture's allocations are its graph's
		}
		if err := sm.drv.check("cuMemAllocAsync", C.dr_alloc_async(api, c, &bs.dptr, C.size_t(bs.b.Size), h)); err != nil {
			bs.dptr = 0
			return fmt.Errorf("temporary buffer %s (%d bytes on device %d): %w", bs.b.Name, bs.b.Size, bs.dev.ordinal, err) // faults.go: name the buffer
		}
		sm.hold.track(&sm.hold.live.PoolAllocs, 1)
		return nil
	case actFreeDevice:
		bs := &sm.hold.bufs[op.Buffer().ID]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		err := sm.drv.check("cuMemFreeAsync", C.dr_free_async(api, c, bs.dptr, h))
		if err == nil {
			bs.dptr = 0
			sm.hold.track(&sm.hold.live.PoolAllocs, -1)
		}
		return err
	case actFillDevice:
		v := op.Access[0].View
		return sm.drv.check("cuMemsetD32Async", C.dr_memset_async(api, c, sm.hold.ptr(v), C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count), h))
	case actHostWork:
		return sm.drv.check("cuLaunchHostFunc", C.dr_hostwork_launch(api, c, st.work, h))
	case actHostFunc:
		return sm.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(api, c, C.uintptr_t(st.handle), h))
	}
	src, dst := op.Access[0].View, op.Access[1].View
	n := C.size_t(src.Size)
	switch st.act {
	case actCopyDtoD:
		return sm.drv.check("cuMemcpyDtoDAsync_v2", C.dr_dtod_async(api, c, sm.hold.ptr(dst), sm.hold.ptr(src), n, h))
	case actCopyPeer:
		return sm.drv.check("cuMemcpyAsync", C.dr_copy_async(api, c, sm.hold.ptr(dst), sm.hold.ptr(src), n, h))
	case actCopyHtoD:
		return sm.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, sm.hold.ptr(dst), sm.hold.hostPtr(src), n, h))
	case actCopyHtoDPageable:
		// The driver reads pageable memory when the call is made, not in
		// stream order: wait until the stream has reached this point.
		if err := sm.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h)); err != nil {
			return err
		}
		return sm.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, sm.hold.ptr(dst), sm.hold.hostPtr(src), n, h))
	case actCopyDtoH:
		// Into pageable memory the call returns once the copy is done.
		return sm.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, sm.hold.hostPtr(dst), sm.hold.ptr(src), n, h))
	}
	return fmt.Errorf("unknown action %d", st.act)
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

// destroyStreams destroys the session's streams and events (Close).
func (sm *submitter) destroyStreams(keep func(error)) {
	for _, s := range sm.streams {
		keep(sm.drv.streamDestroy(s.dev.ctx, s.h))
		sm.hold.track(&sm.hold.live.Streams, -1)
	}
	for _, e := range sm.events {
		if e.h != nil {
			keep(sm.drv.eventDestroy(e.dev.ctx, e.h))
			sm.hold.track(&sm.hold.live.Events, -1)
		}
	}
}
