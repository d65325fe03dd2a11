package cuda

/*
#include <stdint.h>
#include "cuda.h"

static CUresult w_wait_external(dr_api* a, CUcontext c, CUstream s, uintptr_t e) { return dr_wait(a, c, s, (CUevent)e); }
static CUresult w_record_external(dr_api* a, CUcontext c, CUstream s, uintptr_t e) { return dr_record(a, c, (CUevent)e, s); }
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/executor/device"
)

// The callers' own events (executor.External): a CUevent the caller made,
// in the context of the stream's device, passed as a uintptr. The session
// only waits for it or records it, on its own streams; it never destroys
// it.

var _ device.ExternalEvents = (*Session)(nil)

// WaitExternal does the work of Session.WaitExternal.
func (sm *submitter) WaitExternal(si int, ev uintptr) error {
	se := sm.se
	s, err := sm.externalStream("WaitExternal", si, ev)
	if err != nil {
		return err
	}
	return se.drv.waitExternal(s.dev.ctx, s.h, ev)
}

// RecordExternal does the work of Session.RecordExternal.
func (sm *submitter) RecordExternal(si int, ev uintptr) error {
	se := sm.se
	s, err := sm.externalStream("RecordExternal", si, ev)
	if err != nil {
		return err
	}
	return se.drv.recordExternal(s.dev.ctx, s.h, ev)
}

// waitExternal makes stream s wait for the latest record of the CUevent ev.
func (d *driver) waitExternal(c C.CUcontext, s C.CUstream, ev uintptr) error {
	return d.check("cuStreamWaitEvent", C.w_wait_external(d.api, c, s, C.uintptr_t(ev)))
}

// recordExternal records the CUevent ev on stream s.
func (d *driver) recordExternal(c C.CUcontext, s C.CUstream, ev uintptr) error {
	return d.check("cuEventRecord", C.w_record_external(d.api, c, s, C.uintptr_t(ev)))
}

func (sm *submitter) externalStream(verb string, si int, ev uintptr) (*stream, error) {
	se := sm.se
	if se.closed {
		return nil, fmt.Errorf("cuda: %s: the session is %w", verb, device.ErrClosed)
	}
	if ev == 0 {
		return nil, fmt.Errorf("cuda: %s: no event (a nil CUevent)", verb)
	}
	if se.capt.capture != nil {
		return nil, errors.New("cuda: " + verb + ": a graph cannot hold the caller's events; order the replay with them instead")
	}
	s, err := sm.stream(si)
	if err != nil {
		return nil, err
	}
	if se.host.abandoned.Load() {
		if err := se.host.resume(); err != nil {
			return nil, err
		}
	}
	return s, nil
}
