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

// Submit enqueues steps as Run, Record and Wait would, one after another,
// and implements device.Submitter. Stretches of plain steps (kernel
// launches, fills, and copies between device memory and device or host
// memory of the session, records of events already made on the stream's
// device, and waits) go to the driver from C, one crossing per stretch:
// dagrun's own cost per op is then the driver's, and under CUPTI the push
// and pop around each op are made in the same C loop. The others (allocs,
// frees, host steps, GEMMs, tasks, collectives, ops timed by events, a
// capture) go through Run, Record and Wait.
func (se *Session) Submit(steps []device.Step) (int, error) {
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return 0, err
		}
	}
	stretches := se.capture == nil && se.coll == nil && (!se.timing || se.tracesOps())
	for i := 0; i < len(steps); {
		if stretches {
			j := i
			for j < len(steps) && se.plain(steps[j]) {
				j++
			}
			if j > i {
				n, err := se.submitPlain(steps[i:j])
				i += n
				if err != nil {
					return i, err
				}
				if i < j { // a step its conversion refused: Run says why
					if err := se.submitOne(steps[i]); err != nil {
						return i, err
					}
					i++
				}
				continue
			}
		}
		if err := se.submitOne(steps[i]); err != nil {
			return i, err
		}
		i++
	}
	return len(steps), nil
}

func (se *Session) submitOne(st device.Step) error {
	switch st.Kind {
	case device.RunStep:
		return se.Run(st.Stream, st.Op)
	case device.RecordStep:
		return se.Record(st.Stream, st.Event)
	case device.WaitStep:
		return se.Wait(st.Stream, st.Event)
	}
	return fmt.Errorf("cuda: step of unknown kind %d", st.Kind)
}

// plain reports whether st can go to the driver from C as it stands:
// steps naming what does not exist, and everything else Run, Record and
// Wait do beyond one driver call, go through them.
func (se *Session) plain(st device.Step) bool {
	if st.Stream < 0 || st.Stream >= len(se.streams) {
		return false
	}
	s := &se.streams[st.Stream]
	switch st.Kind {
	case device.RecordStep, device.WaitStep:
		if st.Event < 0 || st.Event >= len(se.events) {
			return false
		}
		e := &se.events[st.Event]
		return e.h != nil && (st.Kind == device.WaitStep || e.dev == s.dev)
	case device.RunStep:
		op := st.Op
		if op == nil || op.ID < 0 || op.ID >= len(se.ops) || se.ops[op.ID].op != op {
			return false
		}
		switch se.ops[op.ID].act {
		case actLaunch, actFill64, actFillDevice, actCopyDtoD, actCopyHtoD, actCopyDtoH:
			return true
		}
	}
	return false
}

// submitPlain enqueues plain steps from C. It returns how many it
// enqueued: fewer than len(steps) where a step failed (the error says
// which op) or its conversion refused it (no error: the caller submits it
// through Run, which reports why).
func (se *Session) submitPlain(steps []device.Step) (int, error) {
	traced := se.tracesOps()
	cs := se.stretch[:0]
	for _, st := range steps {
		s := &se.streams[st.Stream]
		d := C.dr_step{ctx: s.dev.ctx, s: s.h, op: -1}
		switch st.Kind {
		case device.RecordStep:
			d.kind, d.e = C.DR_STEP_RECORD, se.events[st.Event].h
		case device.WaitStep:
			d.kind, d.e = C.DR_STEP_WAIT, se.events[st.Event].h
		case device.RunStep:
			op := st.Op
			o := &se.ops[op.ID]
			if traced {
				d.op = C.int64_t(op.ID)
			}
			switch o.act {
			case actLaunch, actFill64:
				// The addresses of temporary buffers are those of now: a
				// stretch holds no alloc or free.
				if se.bindSlots(o) != nil {
					return se.submitC(steps[:len(cs)], cs, traced)
				}
				d.kind, d.l = C.DR_STEP_LAUNCH, o.launch
			case actFillDevice:
				d.kind, d.d = C.DR_STEP_MEMSET, se.ptr(op.Access[0].View)
				d.esize, d.fill, d.n = C.int(o.esize), C.uint64_t(o.fill), C.size_t(o.count)
			default:
				src, dst := op.Access[0].View, op.Access[1].View
				d.n = C.size_t(src.Size)
				switch o.act {
				case actCopyDtoD:
					d.kind, d.d, d.src = C.DR_STEP_DTOD, se.ptr(dst), se.ptr(src)
				case actCopyHtoD:
					d.kind, d.d, d.host = C.DR_STEP_HTOD, se.ptr(dst), se.hostPtr(src)
				case actCopyDtoH:
					d.kind, d.d, d.host = C.DR_STEP_DTOH, se.ptr(src), se.hostPtr(dst)
				}
			}
		}
		cs = append(cs, d)
	}
	return se.submitC(steps, cs, traced)
}

// submitC makes the driver calls of cs, the conversions of steps, in one
// crossing, and keeps what Run keeps of each op.
func (se *Session) submitC(steps []device.Step, cs []C.dr_step, traced bool) (int, error) {
	se.stretch = cs
	if len(cs) == 0 {
		return 0, nil
	}
	var lib *C.struct_dr_cupti
	if traced {
		if err := se.cupti.takeOrigin(); err != nil {
			return 0, err
		}
		lib = (*C.struct_dr_cupti)(unsafe.Pointer(se.cupti.tr.lib))
	}
	var done, failed C.int
	rc := C.dr_submit(se.drv.api, &cs[0], C.int(len(cs)), lib, &done, &failed)
	n := int(done)
	for i := range min(n+1, len(steps)) { // the failed step too, as Run keeps it
		st := steps[i]
		if st.Kind != device.RunStep {
			continue
		}
		se.streams[st.Stream].last = st.Op.Name
		if traced {
			c := se.cupti
			c.ops = append(c.ops, cuptiOp{op: st.Op.ID, stream: st.Stream, expect: se.ops[st.Op.ID].act.hasRecords()})
			c.setStream(st.Op.ID, st.Stream)
		}
	}
	if rc != 0 {
		st := steps[n]
		err := se.drv.check(stepCall(cs[n].kind), rc)
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
	}
	return "a driver call"
}
