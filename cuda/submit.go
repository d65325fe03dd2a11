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

// NewStream does the work of Session.NewStream.
func (sm *submitter) NewStream(ordinal int, p dag.Priority) error {
	se := sm.se
	if err := unopened(se); err != nil { // faults.go
		return err
	}
	if se.closed {
		return fmt.Errorf("cuda: NewStream: the session is %w", device.ErrClosed)
	}
	d, err := se.hold.device(ordinal)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	h, err := se.drv.streamCreate(d.ctx, StreamPriority(p, d.least, d.greatest))
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(sm.streams), ordinal, err)
	}
	sm.streams = append(sm.streams, stream{h: h, dev: d})
	se.hold.track(&se.hold.live.Streams, 1)
	return nil
}

// NewEvent does the work of Session.NewEvent.
func (sm *submitter) NewEvent() error {
	se := sm.se
	if err := unopened(se); err != nil { // faults.go
		return err
	}
	if se.closed {
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
	se := sm.se
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if se.host.abandoned.Load() {
		if err := se.host.resume(); err != nil {
			return err
		}
	}
	e, err := sm.event(ei)
	if err != nil {
		return err
	}
	if e.dev != s.dev {
		if e.h != nil {
			if err := se.drv.eventDestroy(e.dev.ctx, e.h); err != nil {
				return err
			}
			e.h = nil
			se.hold.track(&se.hold.live.Events, -1)
		}
		if e.h, err = se.drv.eventCreate(s.dev.ctx, false); err != nil {
			return fmt.Errorf("event %d: %w", ei, err)
		}
		e.dev = s.dev
		se.hold.track(&se.hold.live.Events, 1)
	}
	if se.colls.heldOn != nil {
		if err := se.colls.flushP2P(s, actNone); err != nil {
			return err
		}
	}
	return se.drv.check("cuEventRecord", C.dr_record(se.drv.api, s.dev.ctx, e.h, s.h))
}

// Wait does the work of Session.Wait.
func (sm *submitter) Wait(si, ei int) error {
	se := sm.se
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if se.host.abandoned.Load() {
		if err := se.host.resume(); err != nil {
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
	if se.colls.heldOn != nil {
		if err := se.colls.flushP2P(s, actNone); err != nil {
			return err
		}
	}
	return se.drv.check("cuStreamWaitEvent", C.dr_wait(se.drv.api, s.dev.ctx, s.h, e.h))
}

// Run does the work of Session.Run.
func (sm *submitter) Run(si int, op *dag.Op) error {
	se := sm.se
	s, err := sm.stream(si)
	if err != nil {
		return err
	}
	if op == nil || op.ID < 0 || opSlot(op) >= len(sm.ops) {
		return fmt.Errorf("cuda: op %v is not an op of the open graph", op)
	}
	st := &sm.ops[opSlot(op)]
	if st.op != op {
		v, err := se.capt.variant(op)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		st = v
		if st.launch != nil && st.work == nil && st.act != actHostFunc {
			// The driver copies kernel arguments at the launch.
			defer se.capt.dropVariant(st)
		}
	}
	if se.host.abandoned.Load() {
		if err := se.host.resume(); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	if se.tim.tracesOps() { // timing.go
		s.last = op.Name
		if err := se.tim.cupti.runTraced(se, s, si, st, op); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		return nil
	}
	// An op is timed by events of its own before and after it, not by the
	// end of the op before it: that would hide the gaps where the device
	// waits for the host (BENCHMARKS.md has the figures).
	var start C.CUevent
	if se.tim.timing {
		if start, err = se.tim.timingRecord(s); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	s.last = op.Name
	if err := sm.run(s, st); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	if se.tim.timing {
		end, err := se.tim.timingRecord(s)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		se.tim.timed = append(se.tim.timed, timedOp{op: opSlot(op), stream: si, dev: s.dev, start: start, end: end})
	}
	return nil
}

// bindSlots writes the device addresses of st's buffers, as they are now,
// into its launch's arguments.
func (sm *submitter) bindSlots(st *opState) error {
	se := sm.se
	for _, p := range st.slots {
		bs := &se.hold.bufs[p.buf]
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
	se := sm.se
	api, c, h := se.drv.api, s.dev.ctx, s.h
	op := st.op
	if se.colls.heldOn != nil {
		if err := se.colls.flushP2P(s, st.act); err != nil {
			return err
		}
	}
	switch st.act {
	case actNone:
		return nil
	case actGemm:
		return se.gemms.runGemm(s, op)
	case actTask:
		return sm.runTask(s, st)
	case actCollective:
		return se.colls.runCollective(s, st)
	case actCopyViaHost:
		return se.stage.runViaHost(s, st)
	case actMemset2D:
		return sm.runMemset2D(s, st)
	case actControl:
		return se.ctl.run(s, op)
	case actLaunch, actFill64:
		if err := sm.bindSlots(st); err != nil {
			return err
		}
		return se.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, c, st.launch, h))
	case actAllocDevice:
		bs := &se.hold.bufs[op.Buffer().ID]
		if bs.dptr != 0 {
			return fmt.Errorf("temporary buffer %s is already allocated", bs.b.Name)
		}
		if se.capt.capture == nil && se.ctl.building == 0 {
			se.hold.watchPool(s.dev) // poolwatch.go; a capture's allocations are its graph's
		}
		if err := se.drv.check("cuMemAllocAsync", C.dr_alloc_async(api, c, &bs.dptr, C.size_t(bs.b.Size), h)); err != nil {
			bs.dptr = 0
			return fmt.Errorf("temporary buffer %s (%d bytes on device %d): %w", bs.b.Name, bs.b.Size, bs.dev.ordinal, err) // faults.go: name the buffer
		}
		se.hold.track(&se.hold.live.PoolAllocs, 1)
		return nil
	case actFreeDevice:
		bs := &se.hold.bufs[op.Buffer().ID]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		err := se.drv.check("cuMemFreeAsync", C.dr_free_async(api, c, bs.dptr, h))
		if err == nil {
			bs.dptr = 0
			se.hold.track(&se.hold.live.PoolAllocs, -1)
		}
		return err
	case actFillDevice:
		v := op.Access[0].View
		return se.drv.check("cuMemsetD32Async", C.dr_memset_async(api, c, se.hold.ptr(v), C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count), h))
	case actHostWork:
		return se.drv.check("cuLaunchHostFunc", C.dr_hostwork_launch(api, c, st.work, h))
	case actHostFunc:
		return se.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(api, c, C.uintptr_t(st.handle), h))
	}
	src, dst := op.Access[0].View, op.Access[1].View
	n := C.size_t(src.Size)
	switch st.act {
	case actCopyDtoD:
		return se.drv.check("cuMemcpyDtoDAsync_v2", C.dr_dtod_async(api, c, se.hold.ptr(dst), se.hold.ptr(src), n, h))
	case actCopyPeer:
		return se.drv.check("cuMemcpyAsync", C.dr_copy_async(api, c, se.hold.ptr(dst), se.hold.ptr(src), n, h))
	case actCopyHtoD:
		return se.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, se.hold.ptr(dst), se.hold.hostPtr(src), n, h))
	case actCopyHtoDPageable:
		// The driver reads pageable memory when the call is made, not in
		// stream order: wait until the stream has reached this point.
		if err := se.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h)); err != nil {
			return err
		}
		return se.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, se.hold.ptr(dst), se.hold.hostPtr(src), n, h))
	case actCopyDtoH:
		// Into pageable memory the call returns once the copy is done.
		return se.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, se.hold.hostPtr(dst), se.hold.ptr(src), n, h))
	}
	return fmt.Errorf("unknown action %d", st.act)
}

// freeRecords frees the C records of the session's ops (Close).
func (sm *submitter) freeRecords() {
	se := sm.se
	for i := range sm.ops {
		st := &sm.ops[i]
		if st.launch != nil {
			C.free(unsafe.Pointer(st.launch))
			se.hold.track(&se.hold.live.HostAllocs, -1)
		}
		if st.work != nil {
			C.free(unsafe.Pointer(st.work))
			se.hold.track(&se.hold.live.HostAllocs, -1)
		}
		if st.act == actHostFunc && st.handle != 0 {
			st.handle.Delete()
			se.hold.track(&se.hold.live.Callbacks, -1)
		}
	}
}

// destroyStreams destroys the session's streams and events (Close).
func (sm *submitter) destroyStreams(keep func(error)) {
	se := sm.se
	for _, s := range sm.streams {
		keep(se.drv.streamDestroy(s.dev.ctx, s.h))
		se.hold.track(&se.hold.live.Streams, -1)
	}
	for _, e := range sm.events {
		if e.h != nil {
			keep(se.drv.eventDestroy(e.dev.ctx, e.h))
			se.hold.track(&se.hold.live.Events, -1)
		}
	}
}
