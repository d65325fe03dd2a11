package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// action is what Run does for an op, decided at Open (prepare.go). What
// each action does is its entry in actions; nothing else switches on
// actions (TestActionTable checks every action has an entry).
type action uint8

const (
	actNone action = iota
	actAllocDevice
	actFreeDevice
	actLaunch
	actFillDevice
	actFill64
	actHostWork // copies and fills of host memory only, run by a C callback
	actHostFunc
	actCopyDtoD
	actCopyPeer
	actCopyHtoD
	actCopyHtoDPageable
	actCopyDtoH
	actGemm
	actTask        // a stream task's function enqueues the work
	actCollective  // an NCCL call
	actCopyViaHost // a copy between devices through pinned host memory
	actMemset2D
	actControl // loops and branches
	numActions
)

// actionInfo is what the session does for ops of one action.
type actionInfo struct {
	name string
	// run makes the driver call (one cgo call, two for pageable uploads)
	// that enqueues st on s.
	run func(sm *submitter, s *stream, st *opState) error
	// step, for the actions Submit enqueues from C in a stretch, converts
	// st into d's kind and operands; false where st cannot go in a
	// stretch now (Run then reports why). nil for the others.
	step func(sm *submitter, s *stream, st *opState, d *C.dr_step) bool
	// records: the work always gets CUPTI activity records (kernel,
	// memcpy or memset ones). Tasks may enqueue anything, allocations
	// have records only when a pool grows, host steps none.
	records bool
}

// actions holds every action's entry. It is filled at init: its
// functions reach Run, whose loops and branches look here again.
var actions [numActions]actionInfo

func init() {
	actions = [numActions]actionInfo{
		actNone:             {name: "none", run: func(*submitter, *stream, *opState) error { return nil }},
		actAllocDevice:      {name: "alloc", run: runAlloc},
		actFreeDevice:       {name: "free", run: runFree},
		actLaunch:           {name: "launch", run: runLaunch, step: stepLaunch, records: true},
		actFillDevice:       {name: "fill", run: runFillDevice, step: stepFillDevice, records: true},
		actFill64:           {name: "fill64", run: runLaunch, step: stepLaunch, records: true},
		actHostWork:         {name: "host work", run: runHostWork},
		actHostFunc:         {name: "host step", run: runHostFunc},
		actCopyDtoD:         {name: "copy dtod", run: runCopyDtoD, step: stepCopyDtoD, records: true},
		actCopyPeer:         {name: "copy peer", run: runCopyPeer, records: true},
		actCopyHtoD:         {name: "copy htod", run: runCopyHtoD, step: stepCopyHtoD, records: true},
		actCopyHtoDPageable: {name: "copy htod pageable", run: runCopyHtoDPageable, records: true},
		actCopyDtoH:         {name: "copy dtoh", run: runCopyDtoH, step: stepCopyDtoH, records: true},
		actGemm: {name: "gemm", run: func(sm *submitter, s *stream, st *opState) error {
			return sm.gemms.runGemm(s, st.op)
		}, step: stepGemm, records: true},
		actTask: {name: "task", run: runTask},
		actCollective: {name: "collective", run: func(sm *submitter, s *stream, st *opState) error {
			return sm.colls.runCollective(s, st)
		}},
		actCopyViaHost: {name: "copy via host", run: func(sm *submitter, s *stream, st *opState) error {
			return sm.stage.runViaHost(s, st)
		}, records: true},
		actMemset2D: {name: "memset2d", run: runMemset2D, records: true},
		actControl: {name: "control", run: func(sm *submitter, s *stream, st *opState) error {
			return sm.ctl.run(s, st.op)
		}},
	}
}

// info is a's entry in actions.
func (a action) info() actionInfo {
	if a >= numActions {
		return actionInfo{name: fmt.Sprintf("action %d", a), run: func(*submitter, *stream, *opState) error {
			return fmt.Errorf("unknown action %d", a)
		}}
	}
	return actions[a]
}

// run makes the driver call that enqueues st on s, with st's action.
func (sm *submitter) run(s *stream, st *opState) error {
	if sm.colls.heldOn != nil {
		if err := sm.colls.flushP2P(s, st.act); err != nil {
			return err
		}
	}
	return st.act.info().run(sm, s, st)
}

func runLaunch(sm *submitter, s *stream, st *opState) error {
	if err := sm.bindSlots(st); err != nil {
		return err
	}
	return sm.drv.check("cuLaunchKernel", C.dr_launch_kernel(sm.drv.api, s.dev.ctx, st.launch, s.h))
}

func runAlloc(sm *submitter, s *stream, st *opState) error {
	bs := &sm.hold.bufs[st.op.Buffer().ID]
	if bs.dptr != 0 {
		return fmt.Errorf("temporary buffer %s is already allocated", bs.b.Name)
	}
	if sm.capt.capture == nil && sm.ctl.building == 0 {
		sm.hold.watchPool(s.dev) // a capture's allocations are its graph's
	}
	if err := sm.drv.check("cuMemAllocAsync", C.dr_alloc_async(sm.drv.api, s.dev.ctx, &bs.dptr, C.size_t(bs.b.Size), s.h)); err != nil {
		bs.dptr = 0
		return fmt.Errorf("temporary buffer %s (%d bytes on device %d): %w", bs.b.Name, bs.b.Size, bs.dev.ordinal, err) // name the buffer
	}
	sm.hold.track(&sm.hold.live.PoolAllocs, 1)
	return nil
}

func runFree(sm *submitter, s *stream, st *opState) error {
	bs := &sm.hold.bufs[st.op.Buffer().ID]
	if bs.dptr == 0 {
		return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
	}
	err := sm.drv.check("cuMemFreeAsync", C.dr_free_async(sm.drv.api, s.dev.ctx, bs.dptr, s.h))
	if err == nil {
		bs.dptr = 0
		sm.hold.track(&sm.hold.live.PoolAllocs, -1)
	}
	return err
}

func runFillDevice(sm *submitter, s *stream, st *opState) error {
	v := st.op.Access[0].View
	return sm.drv.check("cuMemsetD32Async", C.dr_memset_async(sm.drv.api, s.dev.ctx, sm.hold.ptr(v), C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count), s.h))
}

func runHostWork(sm *submitter, s *stream, st *opState) error {
	return sm.drv.check("cuLaunchHostFunc", C.dr_hostwork_launch(sm.drv.api, s.dev.ctx, st.work, s.h))
}

func runHostFunc(sm *submitter, s *stream, st *opState) error {
	return sm.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(sm.drv.api, s.dev.ctx, C.uintptr_t(st.handle), s.h))
}

// copyViews are a copy's source and destination, and its size.
func copyViews(st *opState) (src, dst dag.View, n C.size_t) {
	src, dst = st.op.Access[0].View, st.op.Access[1].View
	return src, dst, C.size_t(src.Size)
}

func runCopyDtoD(sm *submitter, s *stream, st *opState) error {
	src, dst, n := copyViews(st)
	return sm.drv.check("cuMemcpyDtoDAsync_v2", C.dr_dtod_async(sm.drv.api, s.dev.ctx, sm.hold.ptr(dst), sm.hold.ptr(src), n, s.h))
}

func runCopyPeer(sm *submitter, s *stream, st *opState) error {
	src, dst, n := copyViews(st)
	return sm.drv.check("cuMemcpyAsync", C.dr_copy_async(sm.drv.api, s.dev.ctx, sm.hold.ptr(dst), sm.hold.ptr(src), n, s.h))
}

func runCopyHtoD(sm *submitter, s *stream, st *opState) error {
	src, dst, n := copyViews(st)
	return sm.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(sm.drv.api, s.dev.ctx, sm.hold.ptr(dst), sm.hold.hostPtr(src), n, s.h))
}

func runCopyHtoDPageable(sm *submitter, s *stream, st *opState) error {
	// The driver reads pageable memory when the call is made, not in
	// stream order: wait until the stream has reached this point.
	if err := sm.drv.check("cuStreamSynchronize", C.dr_stream_sync(sm.drv.api, s.dev.ctx, s.h)); err != nil {
		return err
	}
	return runCopyHtoD(sm, s, st)
}

func runCopyDtoH(sm *submitter, s *stream, st *opState) error {
	// Into pageable memory the call returns once the copy is done.
	src, dst, n := copyViews(st)
	return sm.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(sm.drv.api, s.dev.ctx, sm.hold.hostPtr(dst), sm.hold.ptr(src), n, s.h))
}
