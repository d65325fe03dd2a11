package cuda

/*
#include "cuda.h"
#include "cupti.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Submit does the work of Session.Submit.
func (sm *submitter) Submit(steps []device.Step) (int, error) {
	if sm.host.abandoned.Load() {
		if err := sm.host.resume(); err != nil {
			return 0, err
		}
	}
	stretches := sm.capt.capture == nil && sm.colls.coll == nil && (!sm.tim.timing || sm.tim.tracesOps())
	for i := 0; i < len(steps); {
		if stretches {
			j := i
			for j < len(steps) && sm.plain(steps[j]) {
				j++
			}
			if i == 0 { // the device idles until the first op's call
				j = firstCrossing(steps[:j])
			}
			if j > i {
				n, err := sm.submitPlain(steps[i:j])
				i += n
				if err != nil {
					return i, err
				}
				if i < j { // a step its conversion refused: Run says why
					if err := sm.submitOne(steps[i]); err != nil {
						return i, err
					}
					i++
				}
				continue
			}
		}
		if err := sm.submitOne(steps[i]); err != nil {
			return i, err
		}
		i++
	}
	return len(steps), nil
}

// firstCrossing returns how many of plain, the steps a Submit call begins
// with, its first crossing into C takes: those up to its first op and the
// record after it. Converting the rest first would hold the idle device
// back by their conversion: the MLP block's eager run at T = 512 (80
// steps) took 7-19 us longer so on an H200.
func firstCrossing(plain []device.Step) int {
	for k, st := range plain {
		if st.Kind == device.RunStep {
			if k+1 < len(plain) && plain[k+1].Kind == device.RecordStep {
				k++
			}
			return k + 1
		}
	}
	return len(plain)
}

func (sm *submitter) submitOne(st device.Step) error {
	switch st.Kind {
	case device.RunStep:
		return sm.Run(st.Stream, st.Op)
	case device.RecordStep:
		return sm.Record(st.Stream, st.Event)
	case device.WaitStep:
		return sm.Wait(st.Stream, st.Event)
	}
	return fmt.Errorf("cuda: step of unknown kind %d", st.Kind)
}

// plain reports whether st can go to the driver from C as it stands:
// steps naming what does not exist, and everything else Run, Record and
// Wait do beyond one driver call, go through them.
func (sm *submitter) plain(st device.Step) bool {
	if st.Stream < 0 || st.Stream >= len(sm.streams) {
		return false
	}
	s := &sm.streams[st.Stream]
	switch st.Kind {
	case device.RecordStep, device.WaitStep:
		if st.Event < 0 || st.Event >= len(sm.events) {
			return false
		}
		e := &sm.events[st.Event]
		return e.h != nil && (st.Kind == device.WaitStep || e.dev == s.dev)
	case device.RunStep:
		op := st.Op
		if op == nil || op.ID < 0 || opSlot(op) >= len(sm.ops) || sm.ops[opSlot(op)].op != op {
			return false
		}
		return sm.ops[opSlot(op)].act.info().step != nil
	}
	return false
}

// submitPlain enqueues plain steps from C. It returns how many it
// enqueued: fewer than len(steps) where a step failed (the error says
// which op) or its conversion refused it (no error: the caller submits it
// through Run, which reports why).
func (sm *submitter) submitPlain(steps []device.Step) (int, error) {
	traced := sm.tim.tracesOps()
	cs := sm.stretch[:0]
	for _, st := range steps {
		s := &sm.streams[st.Stream]
		s.busy = true
		d := C.dr_step{ctx: s.dev.ctx, s: s.h, op: -1}
		switch st.Kind {
		case device.RecordStep:
			d.kind, d.e = C.DR_STEP_RECORD, sm.events[st.Event].h
		case device.WaitStep:
			d.kind, d.e = C.DR_STEP_WAIT, sm.events[st.Event].h
		case device.RunStep:
			op := st.Op
			o := &sm.ops[opSlot(op)]
			if traced {
				d.op = C.int64_t(opSlot(op))
			}
			if !o.act.info().step(sm, s, o, &d) {
				return sm.submitC(steps[:len(cs)], cs, traced)
			}
		}
		cs = append(cs, d)
	}
	return sm.submitC(steps, cs, traced)
}

// submitC makes the driver calls of cs, the conversions of steps, in one
// crossing, and keeps what Run keeps of each op.
func (sm *submitter) submitC(steps []device.Step, cs []C.dr_step, traced bool) (int, error) {
	sm.stretch = cs
	if len(cs) == 0 {
		return 0, nil
	}
	var lib *C.struct_dr_cupti
	if traced {
		if err := sm.tim.cupti.takeOrigin(); err != nil {
			return 0, err
		}
		lib = (*C.struct_dr_cupti)(unsafe.Pointer(sm.tim.cupti.tr.lib))
	}
	var done, failed, libStatus C.int
	rc := C.dr_submit(sm.drv.api, &cs[0], C.int(len(cs)), lib, &done, &failed, &libStatus)
	n := int(done)
	for i := range min(n+1, len(steps)) { // the failed step too, as Run keeps it
		st := steps[i]
		if st.Kind != device.RunStep {
			continue
		}
		sm.streams[st.Stream].last = st.Op.Name
		if traced {
			c := sm.tim.cupti
			c.ops = append(c.ops, cuptiOp{op: opSlot(st.Op), stream: st.Stream, expect: sm.ops[opSlot(st.Op)].act.info().records})
			c.setStream(opSlot(st.Op), st.Stream)
		}
	}
	if rc != 0 {
		st := steps[n]
		err := sm.drv.check(stepCall(cs[n].kind), rc)
		if cs[n].kind == C.DR_STEP_GEMM && libStatus != 0 {
			err = sm.gemms.gemm.statusErr("cublasLtMatmul", int(libStatus))
		}
		if st.Kind == device.RunStep {
			err = &dag.OpError{Op: st.Op.Name, Err: err}
		}
		return n, err
	}
	if failed != 0 {
		last := len(steps) - 1
		err := error(errors.New("cupti: pushing or popping an op's correlation id failed"))
		if st := steps[last]; st.Kind == device.RunStep {
			err = &dag.OpError{Op: st.Op.Name, Err: err}
		}
		return last, err
	}
	return n, nil
}

// stepCall names the driver call of a plain step's kind, for errors.
func stepCall(kind C.int) string {
	switch kind {
	case C.DR_STEP_LAUNCH:
		return "cuLaunchKernel"
	case C.DR_STEP_MEMSET:
		return "cuMemsetD32Async"
	case C.DR_STEP_HTOD:
		return "cuMemcpyHtoDAsync_v2"
	case C.DR_STEP_DTOH:
		return "cuMemcpyDtoHAsync_v2"
	case C.DR_STEP_DTOD:
		return "cuMemcpyDtoDAsync_v2"
	case C.DR_STEP_RECORD:
		return "cuEventRecord"
	case C.DR_STEP_WAIT:
		return "cuStreamWaitEvent"
	case C.DR_STEP_GEMM:
		return "cublasLtMatmul"
	}
	return "a driver call"
}

// The steps of actions (actions.go) that go in a stretch.

func stepLaunch(sm *submitter, _ *stream, st *opState, d *C.dr_step) bool {
	// The addresses of temporary buffers are those of now: a stretch
	// holds no alloc or free.
	if sm.bindSlots(st) != nil {
		return false
	}
	d.kind, d.l = C.DR_STEP_LAUNCH, st.launch
	return true
}

func stepGemm(sm *submitter, s *stream, st *opState, d *C.dr_step) bool {
	// Operands that fail their checks: Run says why.
	r, ptr, err := sm.gemms.operands(s, st.op)
	if err != nil || r.unfused != "" { // an unfused epilogue's launches: Run does them
		return false
	}
	d.kind, d.lt, d.gemm = C.DR_STEP_GEMM, (*C.struct_dr_lt)(unsafe.Pointer(sm.gemms.gemm.lt.lib)), (*C.struct_dr_gemm)(unsafe.Pointer(r.c))
	d.x, d.y, d.src, d.d, d.bias = ptr[dag.GemmB], ptr[dag.GemmA], ptr[dag.GemmC], ptr[dag.GemmD], ptr[gemmBias]
	return true
}

func stepFillDevice(sm *submitter, _ *stream, st *opState, d *C.dr_step) bool {
	d.kind, d.d = C.DR_STEP_MEMSET, sm.hold.ptr(st.op.Access[0].View)
	d.esize, d.fill, d.n = C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count)
	return true
}

func stepCopyDtoD(sm *submitter, _ *stream, st *opState, d *C.dr_step) bool {
	src, dst, n := copyViews(st)
	d.kind, d.n, d.d, d.src = C.DR_STEP_DTOD, n, sm.hold.ptr(dst), sm.hold.ptr(src)
	return true
}

func stepCopyHtoD(sm *submitter, _ *stream, st *opState, d *C.dr_step) bool {
	src, dst, n := copyViews(st)
	d.kind, d.n, d.d, d.host = C.DR_STEP_HTOD, n, sm.hold.ptr(dst), sm.hold.hostPtr(src)
	return true
}

func stepCopyDtoH(sm *submitter, _ *stream, st *opState, d *C.dr_step) bool {
	src, dst, n := copyViews(st)
	d.kind, d.n, d.d, d.host = C.DR_STEP_DTOH, n, sm.hold.ptr(src), sm.hold.hostPtr(dst)
	return true
}
