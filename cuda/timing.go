package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Timing: events around each op of an eager run, read back by Spans.

type timedOp struct {
	op, stream int
	dev        *sessDevice
	start, end C.CUevent
}

// SetTiming turns op timing on or off; call it before the first run.
func (se *Session) SetTiming(on bool) { se.timing = on }

// timingRecord records a timing event on s, and the device's time origin
// first if this is the run's first op on the device.
func (se *Session) timingRecord(s *stream) (C.CUevent, error) {
	d := s.dev
	if d.origin == nil {
		o, err := se.timingEvent(d)
		if err != nil {
			return nil, err
		}
		d.origin = o
		if err := se.drv.check("cuEventRecord", C.dr_record(se.drv.api, d.ctx, o, s.h)); err != nil {
			return nil, err
		}
	}
	e, err := se.timingEvent(d)
	if err != nil {
		return nil, err
	}
	return e, se.drv.check("cuEventRecord", C.dr_record(se.drv.api, d.ctx, e, s.h))
}

func (se *Session) timingEvent(d *sessDevice) (C.CUevent, error) {
	if n := len(d.timingEvents); n > 0 {
		e := d.timingEvents[n-1]
		d.timingEvents = d.timingEvents[:n-1]
		return e, nil
	}
	e, err := se.drv.eventCreate(d.ctx, true)
	if err == nil {
		se.track(&se.live.Events, 1)
	}
	return e, err
}

// Spans calls f with each op run since the last call: its stream and its
// start and end on the device, from the time origin of its device (an
// event recorded before the first op of the run there). Call it after Sync.
// The times are read in one driver crossing per device.
func (se *Session) Spans(f func(op, stream int, start, end time.Duration)) error {
	var first error
	ms := slices.Grow(se.spanMs[:0], 2*len(se.timed))[:2*len(se.timed)]
	for _, d := range se.devs {
		if d.origin == nil {
			continue
		}
		evs, at := se.spanEvs[:0], se.spanAt[:0]
		for i, t := range se.timed {
			if t.dev == d {
				evs = append(evs, t.start, t.end)
				at = append(at, i)
			}
		}
		dms := slices.Grow(se.spanDevMs[:0], len(evs))[:len(evs)]
		se.spanEvs, se.spanAt, se.spanDevMs = evs, at, dms
		err := se.drv.elapsedMany(d.ctx, d.origin, evs, dms)
		if err != nil && first == nil {
			var ee *eventError
			if errors.As(err, &ee) && ee.index/2 < len(at) {
				err = fmt.Errorf("timing op %q: %w", se.g.Ops[se.timed[at[ee.index/2]].op].Name, err)
			}
			first = err
		}
		for k, i := range at {
			ms[2*i], ms[2*i+1] = dms[2*k], dms[2*k+1]
		}
	}
	se.spanMs = ms
	for i, t := range se.timed {
		start, end := ms[2*i], ms[2*i+1]
		if start != start || end != end { // NaN: not readable
			continue
		}
		f(t.op, t.stream, msDuration(start), msDuration(end))
	}
	se.recycleTiming()
	return first
}

// recycleTiming returns the timing events of the ops timed since the last
// call, and each device's time origin, to their devices' free lists.
func (se *Session) recycleTiming() {
	for _, t := range se.timed {
		t.dev.timingEvents = append(t.dev.timingEvents, t.start, t.end)
	}
	se.timed = se.timed[:0]
	for _, d := range se.devs {
		if d.origin != nil {
			d.timingEvents = append(d.timingEvents, d.origin)
			d.origin = nil
		}
	}
}

func msDuration(ms float32) time.Duration {
	return time.Duration(float64(ms) * float64(time.Millisecond))
}
