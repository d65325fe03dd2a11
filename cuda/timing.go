package cuda

/*
#include <stdlib.h>
#include "cuda.h"
#include "cupti.h"
*/
import "C"

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
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
// The times are read in one driver crossing per device. Under CUPTI the
// ops of graph replays are there too, once per replay (ReplaySpans tells
// the replays apart).
func (se *Session) Spans(f func(op, stream int, start, end time.Duration)) error {
	if se.cupti != nil {
		return se.cuptiSpans(func(_, op, stream int, start, end time.Duration) { f(op, stream, start, end) })
	}
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

// Timing with CUPTI: activity records of each op's device work, named by
// the op pushed around its submission, in place of two events per op.

// Timing sources a session can use (SetTimingSource, TimingSource).
const (
	TimingAuto   = "auto"   // CUPTI where it loads, knows the version and is free; events otherwise
	TimingCUPTI  = "cupti"  // CUPTI activity records
	TimingEvents = "events" // a pair of CUDA events around each op
)

// cuptiTiming is a session's CUPTI tracer and what it submitted since the
// last Spans: the records name ops by id, the session knows their streams.
type cuptiTiming struct {
	tr     *activityTracer
	origin uint64 // CUPTI's clock just before the run's first op or replay; 0 before it
	ops    []cuptiOp
	// streams is every op's stream as last submitted, captures included:
	// a replay's records name ops that Run did not submit this time.
	streams map[int]int
	// unnamed counts records of the last Spans that named no op of the run
	// (work submitted by someone else in the process, or a launch whose
	// correlation did not arrive).
	unnamed int
	// unmarked counts the records of the last Spans that name an op of a
	// captured graph but no replay: their launch's marker did not arrive
	// (or could not be pushed: unmarkedLaunches), so ReplaySpans leaves
	// them out.
	unmarked, unmarkedLaunches int
}

type cuptiOp struct{ op, stream int }

// SetTimingSource chooses how a timing session times ops; call it after
// SetTiming(true) and before the streams are made. TimingAuto and
// TimingCUPTI try CUPTI (loaded like NVRTC; see cuptiCandidates) and fall
// back to events when it cannot trace, TimingSource saying why; an error
// is returned only for an unknown source. CUPTI's sink is the process's:
// while one session holds it, another falls back to events as busy.
func (se *Session) SetTimingSource(src string) error {
	switch src {
	case TimingEvents:
		se.closeCUPTI()
		se.timingWhy = "events asked for"
		return nil
	case TimingAuto, TimingCUPTI, "":
	default:
		return fmt.Errorf("cuda: timing source %q: want %q, %q or %q", src, TimingAuto, TimingCUPTI, TimingEvents)
	}
	if !se.timing || se.cupti != nil {
		return nil
	}
	tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		se.timingWhy = "CUPTI unusable, so events: " + err.Error()
		return nil
	}
	se.cupti = &cuptiTiming{tr: tr, streams: map[int]int{}}
	se.timingWhy = fmt.Sprintf("CUPTI %d from %s", tr.version, tr.path)
	return nil
}

// TimingSource says how the session times ops (TimingCUPTI or
// TimingEvents; "" when timing is off) and why, and how many CUPTI records
// were dropped since it started (by CUPTI for want of buffer space, or by
// dagrun for want of memory): spans of those ops are missing.
func (se *Session) TimingSource() (source, why string, dropped uint64) {
	switch {
	case !se.timing:
		return "", "timing is off", 0
	case se.cupti != nil:
		return TimingCUPTI, se.timingWhy, se.cupti.tr.dropped()
	}
	if se.timingWhy == "" {
		return TimingEvents, "events by default", 0
	}
	return TimingEvents, se.timingWhy, 0
}

func (se *Session) closeCUPTI() error {
	if se.cupti == nil {
		return nil
	}
	err := se.cupti.tr.close()
	se.cupti = nil
	return err
}

// runTraced submits st with op pushed to CUPTI around the driver call, on
// one OS thread (CUPTI keeps pushed ids per thread). Nothing here waits on
// CUPTI: the push, the driver callback at the call's entry and the pop are
// all on this thread, and the records come in buffers CUPTI hands over on
// its own.
func (se *Session) runTraced(s *stream, si int, st *opState, op *dag.Op) error {
	c := se.cupti
	if c.origin == 0 {
		now, err := c.tr.now()
		if err != nil {
			return err
		}
		c.origin = now
	}
	err := c.tr.tracedCall(op.ID, func() error { return se.run(s, st) })
	c.ops = append(c.ops, cuptiOp{op: op.ID, stream: si})
	c.streams[op.ID] = si
	return err
}

// launchTraced enqueues one replay of g on s, the session's launch number
// seq, with seq's replay marker pushed to CUPTI around the launch in the
// same C call: the launch's correlation id then names the replay, and so
// do all its kernel, copy and fill records. The first launch since the
// last Spans takes the time origin, as an eager run's first op does.
// Nothing here waits on CUPTI: the records come in buffers CUPTI hands
// over on its own, read at the next Spans. A marker that cannot be pushed
// leaves the replay unmarked (counted), not the launch undone.
func (se *Session) launchTraced(g *graph, s *stream, seq int) error {
	c := se.cupti
	if c.origin == 0 {
		now, err := c.tr.now()
		if err != nil {
			return err
		}
		c.origin = now
	}
	var failed C.int
	rc := C.dr_cupti_graph_launch(c.tr.lib, se.drv.api, s.dev.ctx, g.exec, s.h, C.uint64_t(replayMarker+seq), &failed)
	if failed != 0 {
		c.unmarkedLaunches++
	}
	return se.drv.check("cuGraphLaunch", rc)
}

// TimesReplays reports whether ReplaySpans times the ops of graph replays
// launched back to back, each replay apart: under CUPTI. Timed by events
// a replay's ops are not timed (a graph holds no timing events).
func (se *Session) TimesReplays() bool { return se.cupti != nil }

// ReplaySpans is Spans with each span's replay: the session's launch
// number of the graph replay the op ran in (LaunchGraph calls since Open,
// from 0), or -1 for an op of an eager run. The spans of several replays
// synchronised together are told apart by the marker each launch pushed;
// all are measured from one origin, CUPTI's clock at the first op or
// launch since the last call. Without CUPTI every span has replay -1.
func (se *Session) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	if se.cupti != nil {
		return se.cuptiSpans(f)
	}
	return se.Spans(func(op, stream int, start, end time.Duration) { f(-1, op, stream, start, end) })
}

// cuptiSpans flushes CUPTI and calls f once per op and replay with device
// work since the last call: from its first record's start to its last
// record's end, measured from the CUPTI clock at the run's first op or
// replay. Eager ops come first (replay -1), in submission order, then the
// ops of graph replays, named through the capture (the op pushed while
// each node was captured) and the marker of their launch, in the order
// they started. Ops without device work (host steps, frees, empty ops)
// have no span under CUPTI.
func (se *Session) cuptiSpans(f func(replay, op, stream int, start, end time.Duration)) error {
	c := se.cupti
	recs, err := c.tr.flush()
	type key struct {
		replay int64
		op     int
	}
	type ext struct{ start, end uint64 }
	span := make(map[key]ext, len(c.ops))
	stream := c.streams
	origin := c.origin
	if origin == 0 { // no origin taken: from the first record's start
		for _, r := range recs {
			if _, ok := stream[int(r.Op)]; ok && r.Kind != activityMemoryPool && r.Start != 0 && (origin == 0 || r.Start < origin) {
				origin = r.Start
			}
		}
	}
	c.unnamed, c.unmarked = 0, 0
	for _, r := range recs {
		_, ok := stream[int(r.Op)]
		if !ok || r.Kind == activityMemoryPool || r.Start == 0 || r.End < r.Start || r.Start < origin {
			if !ok {
				c.unnamed++
			}
			continue
		}
		if r.Replay < 0 && r.GraphNodeID != 0 {
			c.unmarked++
		}
		k := key{replay: r.Replay, op: int(r.Op)}
		e, seen := span[k]
		if !seen || r.Start < e.start {
			e.start = r.Start
		}
		if r.End > e.end {
			e.end = r.End
		}
		span[k] = e
	}
	for _, o := range c.ops {
		k := key{replay: -1, op: o.op}
		e, ok := span[k]
		if !ok {
			continue
		}
		delete(span, k) // an op run twice in one submission is reported once
		f(-1, o.op, o.stream, time.Duration(e.start-origin), time.Duration(e.end-origin))
	}
	// The rest are replayed ops, in the order they started.
	rest := make([]key, 0, len(span))
	for k := range span {
		rest = append(rest, k)
	}
	slices.SortFunc(rest, func(a, b key) int {
		if d := cmp.Compare(span[a].start, span[b].start); d != 0 {
			return d
		}
		return cmp.Compare(a.replay, b.replay)
	})
	for _, k := range rest {
		e := span[k]
		f(int(k.replay), k.op, stream[k.op], time.Duration(e.start-origin), time.Duration(e.end-origin))
	}
	c.ops = c.ops[:0]
	c.origin = 0
	return err
}
