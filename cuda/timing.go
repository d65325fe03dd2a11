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
	"github.com/dagrun/dagrun/executor/device"
)

// Timing: events around each op of an eager run, read back by Spans.

// timer times a session's ops: by events around each op, or by CUPTI
// records.
type timer struct {
	drv  *driver
	g    *dag.Graph
	hold *holdings
	ctl  *controller

	timing    bool
	cupti     *cuptiTiming // timing by CUPTI records; nil for events
	timingWhy string       // why the timing source is what it is
	// cuptiWas is the closed tracer's source and drop count, which
	// TimingSource still reports after Close.
	cuptiWas struct {
		source  device.TimingSource
		dropped uint64
	}

	timed     []timedOp
	spanEvs   []C.CUevent // Spans' scratch: the events of one device's timed ops
	spanAt    []int       // ... the index in timed of each pair of them
	spanDevMs []float32   // ... and their times
	spanMs    []float32   // the start and end of every timed op
}

type timedOp struct {
	op, stream int
	dev        *sessDevice
	start, end C.CUevent
}

// SetTiming does the work of Session.SetTiming.
func (tm *timer) SetTiming(on bool) { tm.timing = on }

// timingRecord records a timing event on s, and the device's time origin
// first if this is the run's first op on the device.
func (tm *timer) timingRecord(s *stream) (C.CUevent, error) {
	d := s.dev
	if d.origin == nil {
		o, err := tm.timingEvent(d)
		if err != nil {
			return nil, err
		}
		d.origin = o
		if err := tm.drv.check("cuEventRecord", C.dr_record(tm.drv.api, d.ctx, o, s.h)); err != nil {
			return nil, err
		}
	}
	e, err := tm.timingEvent(d)
	if err != nil {
		return nil, err
	}
	return e, tm.drv.check("cuEventRecord", C.dr_record(tm.drv.api, d.ctx, e, s.h))
}

func (tm *timer) timingEvent(d *sessDevice) (C.CUevent, error) {
	if n := len(d.timingEvents); n > 0 {
		e := d.timingEvents[n-1]
		d.timingEvents = d.timingEvents[:n-1]
		return e, nil
	}
	e, err := tm.drv.events.create(d.ctx, true)
	if err == nil {
		tm.hold.track(&tm.hold.live.Events, 1)
	}
	return e, err
}

// Spans does the work of Session.Spans.
func (tm *timer) Spans(f func(op, stream int, start, end time.Duration)) error {
	if c := tm.cupti; c != nil {
		if c.whole {
			return errors.Join(tm.eventSpans(f), c.dropReplays())
		}
		return tm.cupti.takeSpans(tm.ctl.loops, func(_, op, stream int, start, end time.Duration) { f(op, stream, start, end) })
	}
	return tm.eventSpans(f)
}

// eventSpans is Spans from the timing events of the ops run since the last
// call.
func (tm *timer) eventSpans(f func(op, stream int, start, end time.Duration)) error {
	var first error
	ms := slices.Grow(tm.spanMs[:0], 2*len(tm.timed))[:2*len(tm.timed)]
	for _, d := range tm.hold.devs {
		if d.origin == nil {
			continue
		}
		evs, at := tm.spanEvs[:0], tm.spanAt[:0]
		for i, t := range tm.timed {
			if t.dev == d {
				evs = append(evs, t.start, t.end)
				at = append(at, i)
			}
		}
		dms := slices.Grow(tm.spanDevMs[:0], len(evs))[:len(evs)]
		tm.spanEvs, tm.spanAt, tm.spanDevMs = evs, at, dms
		err := tm.drv.events.elapsedMany(d.ctx, d.origin, evs, dms)
		if err != nil && first == nil {
			var ee *eventError
			if errors.As(err, &ee) && ee.index/2 < len(at) {
				err = fmt.Errorf("timing op %q: %w", tm.g.OpAt(tm.timed[at[ee.index/2]].op).Name, err)
			}
			first = err
		}
		for k, i := range at {
			ms[2*i], ms[2*i+1] = dms[2*k], dms[2*k+1]
		}
	}
	tm.spanMs = ms
	for i, t := range tm.timed {
		start, end := ms[2*i], ms[2*i+1]
		if start != start || end != end { // NaN: not readable
			continue
		}
		f(t.op, t.stream, msDuration(start), msDuration(end))
	}
	tm.recycleTiming()
	return first
}

// recycleTiming returns the timing events of the ops timed since the last
// call, and each device's time origin, to their devices' free lists.
func (tm *timer) recycleTiming() {
	for _, t := range tm.timed {
		t.dev.timingEvents = append(t.dev.timingEvents, t.start, t.end)
	}
	tm.timed = tm.timed[:0]
	for _, d := range tm.hold.devs {
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

// Timing sources a session can use (SetTimingSource, TimingSource): the
// values of device.TimingSource's constants (TestTimingSources), untyped
// so that they serve executor.WithTimingSource's strings too.
const (
	TimingAuto   = "auto"   // CUPTI where it loads, knows the version and is free; events otherwise
	TimingCUPTI  = "cupti"  // CUPTI activity records
	TimingEvents = "events" // a pair of CUDA events around each op
	// TimingCUPTIGraph times each graph replay as a whole, from CUPTI's
	// graph-level records (one per launch, on the device clock), and eager
	// ops by events: no record of a replayed node is made, which is what
	// per-op tracing of a replay costs the device. ReplaySpans gives one
	// span per replay, with op -1.
	TimingCUPTIGraph = "cupti-graph"
)

// cuptiTiming is a session's CUPTI tracer and what it submitted since the
// last Spans: the records name ops by id, the session knows their streams.
type cuptiTiming struct {
	tr *activityTracer
	// whole says the tracer is a graph-level one (TimingCUPTIGraph):
	// replays are timed whole, eager ops by events.
	whole  bool
	origin uint64 // CUPTI's clock just before the run's first op or replay; 0 before it
	ops    []cuptiOp
	// streams is every op's stream as last submitted, by op ID (-1: never
	// submitted), captures included: a replay's records name ops that Run
	// did not submit this time.
	streams []int32
	// launchBase is the session's number of the first graph launch since
	// the last Spans, launchStreams the stream of each launch since: replay
	// r was launched on launchStreams[r-launchBase].
	launchBase    int
	launchStreams []int32
	// lastRecords is graph.records of the last launch's graph.
	lastRecords int
	// forced counts the flushes collect had to force, since the tracer
	// started.
	forced int
	// expect and held are collect's scratch: by op, 1 for awaited records
	// and 2 for come; the records of a default flush kept across a forced
	// one.
	expect []uint8
	held   []activityRecord
	// unnamed counts records of the last Spans that named no op of the run
	// (work submitted by someone else in the process, or a launch whose
	// correlation did not arrive).
	unnamed int
	// unmarked counts the records of the last Spans that name an op of a
	// captured graph but no replay: their launch's marker did not arrive
	// (or could not be pushed: unmarkedLaunches), so ReplaySpans leaves
	// them out. Under TimingCUPTIGraph it counts graph-launch records
	// naming no replay, and those without timestamps.
	unmarked, unmarkedLaunches int
	// Reused from Spans to Spans: by op ID, the extent of each eager op;
	// by replay and op, the extent of each replayed op; the records of
	// replays, sorted, when they are too spread out for the table.
	eager []extent
	table []extent
	byKey []replayExtent
	// loops is the session's loop index, as takeSpans was given it;
	// bounds and inBodies are spans' scratch: the records of loops, and
	// the records of body ops.
	loops        *loopIndex
	bounds       []activityRecord
	inBodies     []iterExtent
	sortedBodies []iterExtent // sortInBodies' scratch
	bodyBuckets  []int32
	replayStarts []replayStart
}

// cuptiOp is an op traced since the last Spans; expect says its work has
// activity records (it ran, not captured, and is a launch, copy, fill or
// GEMM), which collect waits for.
type cuptiOp struct {
	op, stream int
	expect     bool
}

// extent is a span on CUPTI's clock; a zero start means none.
type extent struct{ start, end uint64 }

func (e *extent) add(start, end uint64) {
	if e.start == 0 || start < e.start {
		e.start = start
	}
	e.end = max(e.end, end)
}

// replayExtent is one record's extent with its replay and op.
type replayExtent struct {
	replay int64
	op     int
	extent
}

// setStream notes that op runs on stream.
func (c *cuptiTiming) setStream(op, stream int) {
	for len(c.streams) <= op {
		c.streams = append(c.streams, -1)
	}
	c.streams[op] = int32(stream)
}

// takeOrigin makes CUPTI's clock now the spans' time origin, unless the
// run (or batch of replays) has one already.
func (c *cuptiTiming) takeOrigin() error {
	if c.origin != 0 {
		return nil
	}
	now, err := c.tr.now()
	if err != nil {
		return err
	}
	c.origin = now
	return nil
}

// streamOf is the stream op last ran on, if it ran.
func (c *cuptiTiming) streamOf(op int64) (int, bool) {
	if op < 0 || op >= int64(len(c.streams)) || c.streams[op] < 0 {
		return 0, false
	}
	return int(c.streams[op]), true
}

// SetTimingSource does the work of Session.SetTimingSource.
func (tm *timer) SetTimingSource(src device.TimingSource) error {
	whole := false
	switch src {
	case TimingEvents:
		tm.closeCUPTI()
		tm.cuptiWas.source = ""
		tm.timingWhy = "events asked for"
		return nil
	case TimingCUPTIGraph:
		whole = true
	case TimingAuto, TimingCUPTI, "":
	default:
		return fmt.Errorf("cuda: timing source %q: want %q, %q, %q or %q", src, TimingAuto, TimingCUPTI, TimingCUPTIGraph, TimingEvents)
	}
	if !tm.timing || (tm.cupti != nil && tm.cupti.whole == whole) {
		return nil
	}
	tm.closeCUPTI()
	start, how := newActivityTracer, "CUPTI %d from %s"
	if whole {
		start = newGraphLevelTracer
		how = "CUPTI %d from %s: graph replays timed whole by its graph-trace records, eager ops by events"
	}
	tr, err := start(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		tm.cuptiWas.source = ""
		tm.timingWhy = "CUPTI unusable, so events: " + err.Error()
		if whole {
			tm.timingWhy = "CUPTI's graph-trace records unusable, so events (a replay timed whole by the host's clock): " + err.Error()
		}
		return nil
	}
	tm.cupti = &cuptiTiming{tr: tr, whole: whole}
	tm.cuptiWas.source = ""
	tm.timingWhy = fmt.Sprintf(how, tr.version, tr.path)
	return nil
}

// TimingSource does the work of Session.TimingSource.
func (tm *timer) TimingSource() (source device.TimingSource, why string, dropped uint64) {
	switch {
	case !tm.timing:
		return "", "timing is off", 0
	case tm.cupti != nil && tm.cupti.whole:
		return TimingCUPTIGraph, tm.timingWhy, tm.cupti.tr.dropped()
	case tm.cupti != nil:
		return TimingCUPTI, tm.timingWhy, tm.cupti.tr.dropped()
	case tm.cuptiWas.source != "":
		// The tracer is closed (with the session): its account stays.
		return tm.cuptiWas.source, tm.timingWhy, tm.cuptiWas.dropped
	}
	if tm.timingWhy == "" {
		return TimingEvents, "events by default", 0
	}
	return TimingEvents, tm.timingWhy, 0
}

func (tm *timer) closeCUPTI() error {
	if tm.cupti == nil {
		return nil
	}
	tm.cuptiWas.source, tm.cuptiWas.dropped = TimingCUPTI, tm.cupti.tr.dropped()
	if tm.cupti.whole {
		tm.cuptiWas.source = TimingCUPTIGraph
	}
	err := tm.cupti.tr.close()
	tm.cupti = nil
	return err
}

// tracesOps reports whether eager ops are traced by CUPTI (runTraced), not
// by events: under TimingCUPTI, not TimingCUPTIGraph.
func (tm *timer) tracesOps() bool { return tm.cupti != nil && !tm.cupti.whole }

// runTraced submits st with op pushed to CUPTI around the driver call, on
// one OS thread (CUPTI keeps pushed ids per thread). Nothing here waits on
// CUPTI: the push, the driver callback at the call's entry and the pop are
// all on this thread, and the records come in buffers CUPTI hands over on
// its own.
func (c *cuptiTiming) runTraced(sm *submitter, s *stream, si int, st *opState, op *dag.Op) error {
	if err := c.takeOrigin(); err != nil {
		return err
	}
	err := c.tr.tracedCall(opSlot(op), func() error { return sm.run(s, st) })
	expect := st.act.info().records
	if sm.ctl.building > 0 {
		// A body op: its records come once per iteration or taken
		// branch, so none are awaited.
		expect = false
	} else if sm.capt.capture != nil {
		if st.act == actCopyViaHost {
			sm.capt.capture.records += sm.stage.viaHostCopies(st)
		} else if expect {
			sm.capt.capture.records++
		}
		expect = false // a captured op runs in the graph's replays
	}
	c.ops = append(c.ops, cuptiOp{op: opSlot(op), stream: si, expect: expect})
	c.setStream(opSlot(op), si)
	return err
}

// launchTraced enqueues one replay of g on s (the session's stream si), the
// session's launch number seq, with seq's replay marker pushed (dr_cupti_push)
// around the launch in the same C call: the launch's correlation id then
// names the replay, and so do its graph-launch record and all its kernel,
// copy and fill records. The first launch since the last Spans takes the
// time origin, as an eager run's first op does. Nothing here waits on
// CUPTI: the records come in buffers CUPTI hands over on its own, read at
// the next Spans. A marker that cannot be pushed leaves the replay
// unmarked (counted), not the launch undone.
func (c *cuptiTiming) launchTraced(drv *driver, g *graph, s *stream, si, seq int) error {
	if err := c.takeOrigin(); err != nil {
		return err
	}
	if len(c.launchStreams) == 0 || c.launchBase+len(c.launchStreams) != seq {
		c.launchBase, c.launchStreams = seq, c.launchStreams[:0]
	}
	c.launchStreams = append(c.launchStreams, int32(si))
	c.lastRecords = g.records
	var failed C.int
	rc := C.dr_cupti_graph_launch(c.tr.lib, drv.api, s.dev.ctx, g.exec, s.h, C.uint64_t(replayMarker+seq), &failed)
	if failed != 0 {
		c.unmarkedLaunches++
	}
	return drv.check("cuGraphLaunch", rc)
}

// TimesReplays does the work of Session.TimesReplays.
func (tm *timer) TimesReplays() bool { return tm.cupti != nil }

// ReplaySpans does the work of Session.ReplaySpans.
func (tm *timer) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	c := tm.cupti
	switch {
	case c == nil:
		return tm.eventSpans(func(op, stream int, start, end time.Duration) { f(-1, op, stream, start, end) })
	case c.whole:
		err := tm.eventSpans(func(op, stream int, start, end time.Duration) { f(-1, op, stream, start, end) })
		recs, ferr := c.collect()
		c.wholeSpans(recs, f)
		c.reset()
		return errors.Join(err, ferr)
	}
	return tm.cupti.takeSpans(tm.ctl.loops, f)
}

// dropReplays reads and drops the graph-launch records of replays since the
// last call, if there were any launches.
func (c *cuptiTiming) dropReplays() error {
	if len(c.launchStreams) == 0 {
		c.reset()
		return nil
	}
	_, err := c.collect()
	c.reset()
	return err
}

// collect takes the records of the work since the last Spans, which the
// caller has synchronised, and names them: by CUPTI's default flush, and
// by a forced one only where something awaited has not come (see
// activityTracer.take). The records are valid until the next collect.
func (c *cuptiTiming) collect() ([]activityRecord, error) {
	err := c.tr.take(false)
	recs := c.tr.resolvePending()
	if err != nil || c.complete(recs) {
		return recs, err
	}
	c.forced++
	c.held = append(c.held[:0], recs...) // the next take reuses recs' memory
	err = c.tr.take(true)
	c.held = append(c.held, c.tr.resolvePending()...)
	return c.held, err
}

// complete reports whether the named records recs hold every awaited one:
// each op run since the last Spans whose work has records has some, and so
// does every node with records of the last replay launched (under the
// whole-graph tracer: its graph-launch record).
func (c *cuptiTiming) complete(recs []activityRecord) bool {
	nops := len(c.streams)
	c.expect = slices.Grow(c.expect[:0], nops)[:nops]
	clear(c.expect)
	awaited := 0
	for _, o := range c.ops {
		if o.expect && c.expect[o.op] == 0 {
			c.expect[o.op] = 1
			awaited++
		}
	}
	last := int64(-1) // the last replay
	if n := len(c.launchStreams); n > 0 {
		last = int64(c.launchBase + n - 1)
	}
	if awaited == 0 && last < 0 {
		return true
	}
	nodes, whole := 0, false
	for _, r := range recs {
		work := r.Kind == activityKernel || r.Kind == activityMemcpy || r.Kind == activityMemset
		switch {
		case r.Replay < 0:
			if work && r.Op >= 0 && r.Op < int64(nops) && c.expect[r.Op] == 1 {
				c.expect[r.Op] = 2
				awaited--
			}
		case r.Replay == last:
			if work {
				nodes++ // a replayed node has one record
			} else if r.Kind == activityGraphLaunch {
				whole = true
			}
		}
	}
	switch {
	case awaited > 0:
		return false
	case last < 0:
		return true
	case c.whole:
		return whole
	}
	return nodes >= c.lastRecords
}

// reset starts the next Spans: no ops, launches or origin.
func (c *cuptiTiming) reset() {
	c.ops = c.ops[:0]
	c.launchStreams = c.launchStreams[:0]
	c.origin = 0
}

// wholeSpans calls f once per replay with a graph-launch record among recs:
// op -1, the replay's stream, and the record's start and end from the
// origin (or, with none taken, from the earliest record).
func (c *cuptiTiming) wholeSpans(recs []activityRecord, f func(replay, op, stream int, start, end time.Duration)) {
	c.unnamed, c.unmarked = 0, 0
	origin := c.origin
	if origin == 0 {
		for _, r := range recs {
			if r.Kind == activityGraphLaunch && r.Start != 0 && (origin == 0 || r.Start < origin) {
				origin = r.Start
			}
		}
	}
	for _, r := range recs {
		if r.Kind != activityGraphLaunch {
			c.unnamed++
			continue
		}
		// Zero timestamps: CUPTI could not time the launch.
		if r.Replay < 0 || r.Start == 0 || r.End < r.Start || r.Start < origin {
			c.unmarked++
			continue
		}
		stream := 0
		if i := r.Replay - int64(c.launchBase); i >= 0 && i < int64(len(c.launchStreams)) {
			stream = int(c.launchStreams[i])
		}
		f(int(r.Replay), -1, stream, time.Duration(r.Start-origin), time.Duration(r.End-origin))
	}
}

// takeSpans flushes CUPTI and calls f once per op and replay with device
// work since the last call, and once per iteration for the ops of loops'
// bodies (see spans); loops indexes the session's graph (nil: no bodies).
func (c *cuptiTiming) takeSpans(loops *loopIndex, f func(replay, op, stream int, start, end time.Duration)) error {
	c.loops = loops
	recs, err := c.collect()
	c.spans(recs, max(8*len(recs), 1<<16), f)
	c.reset()
	return err
}

// spans calls f once per op and replay with records among recs: from its
// first record's start to its last record's end, measured from the CUPTI
// clock at the run's first op or replay. Eager ops come first (replay -1),
// in submission order, then the ops of graph replays, named through the
// capture (the op pushed while each node was captured) and the marker of
// their launch, by replay and then by op ID. Ops without device work (host
// steps, frees, empty ops) have no span under CUPTI.
//
// The replays' ops are gathered in a table by replay and op ID, with no
// map and no sort, where it has at most maxCells cells; replays spread too
// far apart for that are sorted instead.
func (c *cuptiTiming) spans(recs []activityRecord, maxCells int, f func(replay, op, stream int, start, end time.Duration)) {
	origin := c.origin
	if origin == 0 { // no origin taken: from the first record's start
		for _, r := range recs {
			if _, ok := c.streamOf(r.Op); ok && r.Kind != activityMemoryPool && r.Start != 0 && (origin == 0 || r.Start < origin) {
				origin = r.Start
			}
		}
	}
	nops := len(c.streams)
	c.eager = slices.Grow(c.eager[:0], nops)[:nops]
	clear(c.eager)
	recs = c.loops.withCondRecords(recs) // iterations.go
	c.unnamed, c.unmarked = 0, 0
	lo, hi := int64(-1), int64(-1) // the replays seen
	kept := recs[:0]
	c.bounds, c.inBodies = c.bounds[:0], c.inBodies[:0]
	if c.loops != nil {
		c.findReplayStarts(recs, origin)
	}
	for _, r := range recs {
		_, ok := c.streamOf(r.Op)
		if !ok || r.Kind == activityMemoryPool || r.Start == 0 || r.End < r.Start || r.Start < origin {
			if !ok {
				c.unnamed++
			}
			continue
		}
		if li := c.loops; li != nil && int(r.Op) < len(li.of) {
			if r.Replay < 0 && (li.bounds[r.Op] || li.of[r.Op] != notInBody) {
				r.Replay = c.replayAt(r.Start) // a body's records name no launch
			}
			if li.bounds[r.Op] && r.Kind == activityKernel {
				c.bounds = append(c.bounds, r)
			}
			if l := li.of[r.Op]; l != notInBody {
				c.inBodies = append(c.inBodies, iterExtent{replay: r.Replay, op: int(r.Op), loop: l, extent: extent{r.Start, r.End}})
				continue
			}
		}
		if r.Replay < 0 {
			if r.GraphNodeID != 0 {
				c.unmarked++
			}
			c.eager[r.Op].add(r.Start, r.End)
			continue
		}
		if lo < 0 || r.Replay < lo {
			lo = r.Replay
		}
		hi = max(hi, r.Replay)
		kept = append(kept, r)
	}
	emit := func(replay int64, op int, e extent) {
		f(int(replay), op, int(c.streams[op]), time.Duration(e.start-origin), time.Duration(e.end-origin))
	}
	for _, o := range c.ops {
		if e := c.eager[o.op]; e.start != 0 {
			c.eager[o.op] = extent{} // an op run twice in one submission is reported once
			f(-1, o.op, o.stream, time.Duration(e.start-origin), time.Duration(e.end-origin))
		}
	}
	c.iterationSpans(origin, f)
	if len(kept) == 0 {
		return
	}
	if n := hi - lo + 1; n <= int64(maxCells)/int64(max(nops, 1)) {
		cells := int(n) * nops
		c.table = slices.Grow(c.table[:0], cells)[:cells]
		clear(c.table)
		for _, r := range kept {
			c.table[int(r.Replay-lo)*nops+int(r.Op)].add(r.Start, r.End)
		}
		for i, e := range c.table {
			if e.start != 0 {
				emit(lo+int64(i/nops), i%nops, e)
			}
		}
		return
	}
	keys := c.byKey[:0]
	for _, r := range kept {
		keys = append(keys, replayExtent{replay: r.Replay, op: int(r.Op), extent: extent{r.Start, r.End}})
	}
	slices.SortFunc(keys, func(a, b replayExtent) int {
		if d := cmp.Compare(a.replay, b.replay); d != 0 {
			return d
		}
		return cmp.Compare(a.op, b.op)
	})
	for i := 0; i < len(keys); {
		k := keys[i]
		e := k.extent
		for i++; i < len(keys) && keys[i].replay == k.replay && keys[i].op == k.op; i++ {
			e.add(keys[i].start, keys[i].end)
		}
		emit(k.replay, k.op, e)
	}
	c.byKey = keys
}

// destroyTimingEvents destroys the timing events of the session's devices
// (Close).
func (tm *timer) destroyTimingEvents(keep func(error)) {
	for _, d := range tm.hold.devs {
		for _, e := range d.timingEvents {
			keep(tm.drv.events.destroy(d.ctx, e))
			tm.hold.track(&tm.hold.live.Events, -1)
		}
		d.timingEvents = nil
	}
}
