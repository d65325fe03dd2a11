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

// NewStream creates the next stream: non-blocking, on device, with
// priority mapped by StreamPriority.
func (se *Session) NewStream(ordinal int, p dag.Priority) error {
	if err := se.unopened(); err != nil { // faults.go
		return err
	}
	if se.closed {
		return errors.New("cuda: NewStream: the session is closed")
	}
	d, err := se.device(ordinal)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(se.streams), ordinal, err)
	}
	h, err := se.drv.streamCreate(d.ctx, StreamPriority(p, d.least, d.greatest))
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(se.streams), ordinal, err)
	}
	se.streams = append(se.streams, stream{h: h, dev: d})
	se.track(&se.live.Streams, 1)
	return nil
}

// NewEvent creates the next event. Its driver event is made at its first
// Record, in the context of the recording stream's device.
func (se *Session) NewEvent() error {
	if err := se.unopened(); err != nil { // faults.go
		return err
	}
	if se.closed {
		return errors.New("cuda: NewEvent: the session is closed")
	}
	se.events = append(se.events, event{})
	return nil
}

func (se *Session) stream(i int) (*stream, error) {
	if i < 0 || i >= len(se.streams) {
		return nil, fmt.Errorf("cuda: stream %d does not exist (%d made)", i, len(se.streams))
	}
	return &se.streams[i], nil
}

func (se *Session) event(i int) (*event, error) {
	if i < 0 || i >= len(se.events) {
		return nil, fmt.Errorf("cuda: event %d does not exist (%d made)", i, len(se.events))
	}
	return &se.events[i], nil
}

// Record records event e on stream si.
func (se *Session) Record(si, ei int) error {
	s, err := se.stream(si)
	if err != nil {
		return err
	}
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return err
		}
	}
	e, err := se.event(ei)
	if err != nil {
		return err
	}
	if e.dev != s.dev {
		if e.h != nil {
			if err := se.drv.eventDestroy(e.dev.ctx, e.h); err != nil {
				return err
			}
			e.h = nil
			se.track(&se.live.Events, -1)
		}
		if e.h, err = se.drv.eventCreate(s.dev.ctx, false); err != nil {
			return fmt.Errorf("event %d: %w", ei, err)
		}
		e.dev = s.dev
		se.track(&se.live.Events, 1)
	}
	if err := se.flushP2P(s, actNone); err != nil {
		return err
	}
	return se.drv.check("cuEventRecord", C.dr_record(se.drv.api, s.dev.ctx, e.h, s.h))
}

// Wait makes stream si wait for the last record of event e.
func (se *Session) Wait(si, ei int) error {
	s, err := se.stream(si)
	if err != nil {
		return err
	}
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return err
		}
	}
	e, err := se.event(ei)
	if err != nil {
		return err
	}
	if e.h == nil {
		return fmt.Errorf("cuda: stream %d waits for event %d, which was never recorded", si, ei)
	}
	if err := se.flushP2P(s, actNone); err != nil {
		return err
	}
	return se.drv.check("cuStreamWaitEvent", C.dr_wait(se.drv.api, s.dev.ctx, s.h, e.h))
}

// Run enqueues op on stream si. Errors name the op.
func (se *Session) Run(si int, op *dag.Op) error {
	s, err := se.stream(si)
	if err != nil {
		return err
	}
	if op == nil || op.ID < 0 || op.ID >= len(se.ops) {
		return fmt.Errorf("cuda: op %v is not an op of the open graph", op)
	}
	st := &se.ops[op.ID]
	if st.op != op {
		v, err := se.variant(op)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		st = v
		if st.launch != nil && st.work == nil && st.act != actHostFunc {
			// The driver copies kernel arguments at the launch.
			defer se.dropVariant(st)
		}
	}
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	if se.tracesOps() { // timing.go
		s.last = op.Name
		if err := se.runTraced(s, si, st, op); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		return nil
	}
	// An op is timed by events of its own before and after it, not by the
	// end of the op before it: that would hide the gaps where the device
	// waits for the host (BENCHMARKS.md has the figures).
	var start C.CUevent
	if se.timing {
		if start, err = se.timingRecord(s); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	s.last = op.Name
	if err := se.run(s, st); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	if se.timing {
		end, err := se.timingRecord(s)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		se.timed = append(se.timed, timedOp{op: op.ID, stream: si, dev: s.dev, start: start, end: end})
	}
	return nil
}

// bindSlots writes the device addresses of st's buffers, as they are now,
// into its launch's arguments.
func (se *Session) bindSlots(st *opState) error {
	for _, p := range st.slots {
		bs := &se.bufs[p.buf]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		*p.slot = uint64(bs.dptr) + uint64(p.offset)
	}
	return nil
}

// ptr is the device address of view v now.
func (se *Session) ptr(v dag.View) C.CUdeviceptr {
	return se.bufs[v.Buf.ID].dptr + C.CUdeviceptr(v.Offset)
}

func (se *Session) hostPtr(v dag.View) unsafe.Pointer {
	return unsafe.Add(se.bufs[v.Buf.ID].host, v.Offset)
}

// run makes the driver call (one cgo call, two for pageable uploads) that
// enqueues st on s.
func (se *Session) run(s *stream, st *opState) error {
	api, c, h := se.drv.api, s.dev.ctx, s.h
	op := st.op
	if err := se.flushP2P(s, st.act); err != nil {
		return err
	}
	switch st.act {
	case actNone:
		return nil
	case actGemm:
		return se.runGemm(s, op)
	case actTask:
		return se.runTask(s, st)
	case actCollective:
		return se.runCollective(s, st)
	case actCopyViaHost:
		return se.runViaHost(s, st)
	case actMemset2D:
		return se.runMemset2D(s, st)
	case actLaunch, actFill64:
		if err := se.bindSlots(st); err != nil {
			return err
		}
		return se.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, c, st.launch, h))
	case actAllocDevice:
		bs := &se.bufs[op.Buffer().ID]
		if bs.dptr != 0 {
			return fmt.Errorf("temporary buffer %s is already allocated", bs.b.Name)
		}
		if err := se.drv.check("cuMemAllocAsync", C.dr_alloc_async(api, c, &bs.dptr, C.size_t(bs.b.Size), h)); err != nil {
			bs.dptr = 0
			return fmt.Errorf("temporary buffer %s (%d bytes on device %d): %w", bs.b.Name, bs.b.Size, bs.dev.ordinal, err) // faults.go: name the buffer
		}
		se.track(&se.live.PoolAllocs, 1)
		return nil
	case actFreeDevice:
		bs := &se.bufs[op.Buffer().ID]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		err := se.drv.check("cuMemFreeAsync", C.dr_free_async(api, c, bs.dptr, h))
		if err == nil {
			bs.dptr = 0
			se.track(&se.live.PoolAllocs, -1)
		}
		return err
	case actFillDevice:
		v := op.Access[0].View
		return se.drv.check("cuMemsetD32Async", C.dr_memset_async(api, c, se.ptr(v), C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count), h))
	case actHostWork:
		return se.drv.check("cuLaunchHostFunc", C.dr_hostwork_launch(api, c, st.work, h))
	case actHostFunc:
		return se.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(api, c, C.uintptr_t(st.handle), h))
	}
	src, dst := op.Access[0].View, op.Access[1].View
	n := C.size_t(src.Size)
	switch st.act {
	case actCopyDtoD:
		return se.drv.check("cuMemcpyDtoDAsync_v2", C.dr_dtod_async(api, c, se.ptr(dst), se.ptr(src), n, h))
	case actCopyPeer:
		return se.drv.check("cuMemcpyAsync", C.dr_copy_async(api, c, se.ptr(dst), se.ptr(src), n, h))
	case actCopyHtoD:
		return se.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, se.ptr(dst), se.hostPtr(src), n, h))
	case actCopyHtoDPageable:
		// The driver reads pageable memory when the call is made, not in
		// stream order: wait until the stream has reached this point.
		if err := se.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h)); err != nil {
			return err
		}
		return se.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, se.ptr(dst), se.hostPtr(src), n, h))
	case actCopyDtoH:
		// Into pageable memory the call returns once the copy is done.
		return se.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, se.hostPtr(dst), se.ptr(src), n, h))
	}
	return fmt.Errorf("unknown action %d", st.act)
}
