package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Session is one graph's runs on a Backend (a device.Session, with
// device.Timer, device.Capturer and device.Writer). It holds only what its
// plan needs: its buffers, streams, events, timing events, C records of
// its ops and captured graphs, and releases exactly that at Close; the
// contexts and modules it uses belong to the backend. One goroutine at a
// time calls it, in the order SetTiming, NewStream/NewEvent, then
// Record/Wait/Run and Sync for each run, Read, Close. Sessions on one
// backend run side by side, each from its own goroutine: every driver call
// makes its context current on the thread it runs on (see the package
// doc).
//
// Its work is done by its parts, one per job, each holding its own state
// and C records and given, when the session is built (joined), the parts
// it uses; none holds the Session. Its methods hand each call to the part
// whose job it is.
type Session struct {
	b   *Backend
	drv *driver
	g   *dag.Graph

	// Its parts, one per job, each holding its own state and C records.
	hold   holdings    // devices, buffers and the live count (memory.go)
	sub    submitter   // streams, events, op records; Run, Record, Wait, Submit (submit.go, prepare.go, stretch.go)
	host   hostSide    // host steps' context and errors; Sync (sync.go)
	capt   capturer    // captured graphs (graph.go)
	tim    timer       // event or CUPTI timing (timing.go)
	colls  collectives // the NCCL communicator after Join (collective.go)
	stage  stager      // copies between devices through host memory (peer_session.go)
	gemms  gemmHooks   // cuBLASLt GEMMs (cublas_backend.go)
	faults faultState  // injected faults (faults.go)
	ctl    controller  // loops and branches (control.go)
}

// newSession returns a session of b for g with its parts joined to it.
func newSession(b *Backend, g *dag.Graph) *Session {
	se := joined(&Session{b: b, drv: b.drv, g: g})
	se.hold.devs = map[int]*sessDevice{}
	return se
}

// joined returns se with each of its parts given the parts it uses (and
// the backend, driver and graph where it needs them). No part holds the
// Session. A zero Session (not made by Backend.Open) is joined at its
// first call, with no driver, so that the call fails as an unopened
// session's does.
func joined(se *Session) *Session {
	if se.sub.hold != nil {
		return se
	}
	b, drv, g := se.b, se.drv, se.g
	hd, sm, hst, cpt, tm := &se.hold, &se.sub, &se.host, &se.capt, &se.tim
	cm, stg, gh, fs, ct := &se.colls, &se.stage, &se.gemms, &se.faults, &se.ctl
	hd.b, hd.drv, hd.g = b, drv, g
	sm.drv, sm.hold, sm.host, sm.capt, sm.tim = drv, hd, hst, cpt, tm
	if b != nil {
		sm.reuse = b.reuse
	}
	sm.colls, sm.stage, sm.gemms, sm.ctl = cm, stg, gh, ct
	hst.drv, hst.hold, hst.sub, hst.colls, hst.ctl, hst.faults = drv, hd, sm, cm, ct, fs
	cpt.drv, cpt.hold, cpt.host, cpt.sub, cpt.tim, cpt.colls, cpt.ctl = drv, hd, hst, sm, tm, cm, ct
	tm.drv, tm.g, tm.hold, tm.ctl = drv, g, hd, ct
	cm.b, cm.drv, cm.g, cm.hold, cm.sub, cm.capt, cm.tim = b, drv, g, hd, sm, cpt, tm
	stg.b, stg.drv, stg.hold = b, drv, hd
	gh.b, gh.drv, gh.hold = b, drv, hd
	fs.b, fs.drv, fs.hold, fs.host, fs.sub, fs.capt = b, drv, hd, hst, sm, cpt
	ct.drv, ct.g, ct.hold, ct.sub, ct.capt, ct.tim = drv, g, hd, sm, cpt, tm
	return se
}

var (
	_ device.Session  = (*Session)(nil)
	_ device.Timer    = (*Session)(nil)
	_ device.Capturer = (*Session)(nil)
	_ device.Writer   = (*Session)(nil)

	_ device.Submitter           = (*Session)(nil)
	_ device.ReplayTimer         = (*Session)(nil)
	_ device.TimingSourcer       = (*Session)(nil)
	_ device.CollectiveTimeouter = (*Session)(nil)
	_ device.Memory              = (*Backend)(nil)
	_ device.Unfuser             = (*Backend)(nil)
)

// Unfused lists the GEMMs of session s whose epilogue cuBLASLt had no
// algorithm for (or dagrun did not ask it for: a bias aligned to less
// than 16 bytes): they run the product, then the builtin kernels of the
// epilogue. It is nil for a session of another backend.
func (b *Backend) Unfused(s device.Session) []device.Unfused {
	se, ok := s.(*Session)
	if !ok || se.b != b {
		return nil
	}
	return joined(se).gemms.Unfused()
}

// sessDevice is a device as one session uses it: the backend's device,
// the session's own copy of the functions it launches there (read without
// the backend's lock), and its timing events.
type sessDevice struct {
	*gpu
	funcs        map[*dag.Kernel]C.CUfunction
	fill64       C.CUfunction
	noBuiltins   bool        // the builtin module failed to load for initial contents (initdev.go)
	timingEvents []C.CUevent // recorded ones come back here after Spans
	origin       C.CUevent   // the current run's time origin; nil before its first op
	mark         poolMark    // the measure of the temporaries in the device's pool (poolwatch.go)
}

type stream struct {
	h    C.CUstream
	dev  *sessDevice
	prio int    // the driver's priority it was made with
	last string // the name of the last op run on it, for asynchronous errors
	// busy: work may have been enqueued on it since a Sync last found it
	// done. Sync asks only busy streams: a query of an idle stream costs
	// 1.5-2 us on the H100, 14 us a replay of a graph captured from 8.
	busy bool
}

type event struct {
	h   C.CUevent
	dev *sessDevice
}

// Live reports what the session holds now.
func (se *Session) Live() Resources {
	se.hold.liveMu.Lock()
	defer se.hold.liveMu.Unlock()
	return se.hold.live
}

// track adds d to the count n of se.hold.live.
func (hd *holdings) track(n *int, d int) {
	hd.liveMu.Lock()
	*n += d
	hd.liveMu.Unlock()
}

// device returns device ordinal as the session uses it.
func (hd *holdings) device(ordinal int) (*sessDevice, error) {
	if d := hd.devs[ordinal]; d != nil {
		return d, nil
	}
	d, err := hd.b.device(ordinal)
	if err != nil {
		return nil, err
	}
	sd := &sessDevice{gpu: d, funcs: map[*dag.Kernel]C.CUfunction{}}
	hd.devs[ordinal] = sd
	return sd, nil
}

// openDevices loads the kernels g launches and allocates its persistent buffers
// with their initial contents. On error the caller closes the session.
func openDevices(ctx context.Context, se *Session) error {
	g := se.g
	se.host.hostCtx, se.host.hostCancel = context.WithCancel(context.WithoutCancel(ctx))
	count, err := se.drv.deviceCount()
	if err != nil {
		return err
	}
	for _, buf := range g.Buffers {
		if buf.Placement == dag.Device && buf.Device >= count {
			return &dag.Error{Buffer: buf.Name, Field: "device", Msg: fmt.Sprintf("device %d does not exist: this machine has %d", buf.Device, count),
				Hint: fmt.Sprintf("use a device from 0 to %d", count-1)}
		}
	}
	var badDevice error
	g.Walk(func(op *dag.Op) {
		if op.Device >= count && badDevice == nil {
			badDevice = &dag.Error{Op: op.Name, Field: "device", Msg: fmt.Sprintf("device %d does not exist: this machine has %d", op.Device, count),
				Hint: fmt.Sprintf("use a device from 0 to %d", count-1)}
		}
	})
	if badDevice != nil {
		return badDevice
	}
	if err := se.hold.loadKernels(ctx); err != nil {
		return err
	}
	if err := se.hold.allocBuffers(ctx); err != nil {
		return err
	}
	// The ops of bodies come after the graph's own, by Index.
	se.sub.ops = make([]opState, len(g.Ops)+len(g.Nested))
	for i, op := range g.Ops {
		if op.ID != i {
			return &dag.Error{Op: op.Name, Msg: fmt.Sprintf("has ID %d at index %d", op.ID, i), Hint: "pass a graph made by dag.Builder.Build"}
		}
	}
	for i, op := range g.Nested {
		if op.Index != len(g.Ops)+i {
			return &dag.Error{Op: op.Name, Msg: fmt.Sprintf("has index %d at %d", op.Index, len(g.Ops)+i), Hint: "pass a graph made by dag.Builder.Build"}
		}
	}
	var prepErr error
	g.Walk(func(op *dag.Op) {
		if prepErr == nil {
			if err := se.sub.prepare(&se.sub.ops[opSlot(op)], op); err != nil {
				prepErr = &dag.OpError{Op: op.Name, Err: err}
			}
		}
	})
	return prepErr
}

// syncAll waits for every stream of the session: only its own work, never
// another session's (a cuCtxSynchronize would wait for theirs too, and
// break their captures).
func (sm *submitter) syncAll() error {
	defer sm.host.waiters.Wait() // a cancelled Sync's waiter (sync.go) returns with the work
	var errs []error
	for i := range sm.streams {
		s := &sm.streams[i]
		if err := sm.drv.streams.sync(s.dev.ctx, s.h); err != nil {
			errs = append(errs, fmt.Errorf("stream %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Close waits for the session's streams to finish, then releases its
// graphs, streams, events, buffers and C records: exactly what it made.
// It reports the first failure but releases everything it can. Closing
// twice does nothing.
func (se *Session) Close() error {
	if se.hold.closed || unopened(se.drv) != nil { // faults.go: a zero Session holds nothing
		return nil
	}
	se.hold.closed = true
	defer se.b.forget(se)
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	se.capt.closeGraphs(keep)
	keep(se.colls.closeComm())
	keep(se.sub.syncAll())
	se.ctl.close(keep)
	se.faults.closeFaults() // faults.go
	keep(se.gemms.closeGemm())
	if se.host.hostCancel != nil {
		se.host.hostCancel()
	}
	se.hold.freeBuffers(keep)
	se.hold.freeArenas(keep)
	se.hold.freeWorkspaces(keep) // shared.go
	se.sub.freeRecords()
	se.capt.dropVariants()
	// Streams go back to the Backend for the next session only when every
	// step of the close so far succeeded: their work is done, no capture
	// is open on them.
	se.sub.destroyStreams(keep, len(errs) == 0)
	se.stage.freeStages(keep)
	se.tim.recycleTiming()
	keep(se.tim.closeCUPTI())
	se.tim.destroyTimingEvents(keep)
	se.hold.devs, se.hold.bufs, se.sub.ops, se.sub.streams, se.sub.events, se.tim.timed = nil, nil, nil, nil, nil, nil
	se.host.hostCtx, se.host.hostCancel, se.host.hostErr = nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("cuda: closing the session: %w", errors.Join(errs...))
	}
	return nil
}

// Session's API below hands each call to the part that does its job.

// WaitExternal makes stream si wait for the latest record of the caller's
// event ev (cuStreamWaitEvent).
func (se *Session) WaitExternal(si int, ev uintptr) error {
	return joined(se).sub.WaitExternal(si, ev)
}

// RecordExternal records the caller's event ev on stream si (cuEventRecord).
func (se *Session) RecordExternal(si int, ev uintptr) error {
	return joined(se).sub.RecordExternal(si, ev)
}

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
	return joined(se).sub.Submit(steps)
}

// NewStream creates the next stream: non-blocking, on device, with
// priority mapped by StreamPriority.
func (se *Session) NewStream(ordinal int, p dag.Priority) error {
	return joined(se).sub.NewStream(ordinal, p)
}

// NewEvent creates the next event. Its driver event is made at its first
// Record, in the context of the recording stream's device.
func (se *Session) NewEvent() error {
	return joined(se).sub.NewEvent()
}

// Record records event e on stream si.
func (se *Session) Record(si, ei int) error {
	return joined(se).sub.Record(si, ei)
}

// Wait makes stream si wait for the last record of event e.
func (se *Session) Wait(si, ei int) error {
	return joined(se).sub.Wait(si, ei)
}

// Run enqueues op on stream si. Errors name the op.
func (se *Session) Run(si int, op *dag.Op) error {
	return joined(se).sub.Run(si, op)
}

// BeginCapture starts capturing the work submitted to every stream: it
// begins a capture on stream origin and forks every other stream, of any
// device, from it with an event, so that one graph holds the work of every
// device the plan uses. Timing is off while capturing (a replay is timed
// as a whole, not per op). A session with collectives captures only once
// they have run eagerly (see collective.go).
func (se *Session) BeginCapture(origin int) error {
	return joined(se).capt.BeginCapture(origin)
}

// EndCapture joins every stream back into origin and ends the capture,
// returning the captured graph's number. The graph is not launchable until
// Instantiate (or UpdateGraph, which instantiates it into another graph).
func (se *Session) EndCapture(origin int) (int, error) {
	return joined(se).capt.EndCapture(origin)
}

// Instantiate makes graph gi launchable and uploads it to its device, so
// that the first launch costs what later ones do.
func (se *Session) Instantiate(gi int) error {
	return joined(se).capt.Instantiate(gi)
}

// LaunchGraph enqueues one replay of instantiated graph gi on stream si.
// Launches are numbered from 0 in the session (GraphStats.Launches before
// it): ReplaySpans names the spans of each replay by that number.
func (se *Session) LaunchGraph(gi, si int) error {
	return joined(se).capt.LaunchGraph(gi, si)
}

// UpdateGraph makes instantiated graph gi do what captured graph fresh
// does: in place (cuGraphExecUpdate) when the driver can apply the change,
// which keeps the executable; otherwise by instantiating fresh in its
// place. Either way fresh is used up. It reports whether the update was in
// place. Call it when gi's launches are done.
func (se *Session) UpdateGraph(gi, fresh int) (inPlace bool, err error) {
	return joined(se).capt.UpdateGraph(gi, fresh)
}

// DestroyGraph releases graph gi: its executable and its captured graph.
func (se *Session) DestroyGraph(gi int) error {
	return joined(se).capt.DestroyGraph(gi)
}

// SetBodies gives control op op its bodies' steps (device.Controller):
// they run as CUDA conditional nodes.
func (se *Session) SetBodies(op *dag.Op, bodies [][]device.Step) error {
	return joined(se).ctl.SetBodies(op, bodies)
}

// SetTiming turns op timing on or off; call it before the first run.
func (se *Session) SetTiming(on bool) {
	joined(se).tim.SetTiming(on)
}

// Spans calls f with each op run since the last call: its stream and its
// start and end on the device, from the time origin of its device (an
// event recorded before the first op of the run there). Call it after Sync.
// The times are read in one driver crossing per device. Under CUPTI the
// ops of graph replays are there too, once per replay (ReplaySpans tells
// the replays apart).
//
// Timed by CUPTI's graph-level records (TimingCUPTIGraph), eager ops are
// timed by events and Spans gives theirs; replays have no op spans there,
// and their records are dropped: ReplaySpans reads them.
func (se *Session) Spans(f func(op, stream int, start, end time.Duration)) error {
	return joined(se).tim.Spans(f)
}

// LoopIterations calls f with the iterations each loop ran in the last
// run (device.LoopCounter), for the loops whose spans time only a sample
// of them: under CUPTI an eager run of a loop records its first 8
// iterations op by op, and counts the rest (loopsample.go).
func (se *Session) LoopIterations(f func(op, iterations int)) {
	joined(se).ctl.loopIterations(f)
}

// SetTimingSource chooses how a timing session times ops; call it after
// SetTiming(true) and before the streams are made. TimingAuto and
// TimingCUPTI try CUPTI (loaded like NVRTC; see cuptiCandidates) and fall
// back to events when it cannot trace, TimingSource saying why;
// TimingCUPTIGraph tries CUPTI's graph-level records the same way. An error
// is returned only for an unknown source. CUPTI's sink is the process's:
// while one session holds it, another falls back to events as busy.
func (se *Session) SetTimingSource(src device.TimingSource) error {
	return joined(se).tim.SetTimingSource(src)
}

// TimingSource says how the session times ops (TimingCUPTI,
// TimingCUPTIGraph or TimingEvents; "" when timing is off) and why, and
// how many CUPTI records were dropped since it started (by CUPTI for want
// of buffer space, or by dagrun for want of memory): spans of those ops, or
// replays, are missing.
func (se *Session) TimingSource() (source device.TimingSource, why string, dropped uint64) {
	return joined(se).tim.TimingSource()
}

// TimesReplays reports whether ReplaySpans tells apart graph replays
// launched back to back: under CUPTI, op by op (TimingCUPTI) or each
// replay whole (TimingCUPTIGraph). Timed by events a replay is not timed
// (a graph holds no timing events).
func (se *Session) TimesReplays() bool {
	return joined(se).tim.TimesReplays()
}

// ReplaySpans is Spans with each span's replay: the session's launch
// number of the graph replay the op ran in (LaunchGraph calls since Open,
// from 0), or -1 for an op of an eager run. The spans of several replays
// synchronised together are told apart by the marker each launch pushed;
// all are measured from one origin, CUPTI's clock at the first op or
// launch since the last call. Under TimingCUPTIGraph each replay has one
// span, with op -1, on the stream it was launched on: from the start of its
// first work to the end of its last, as CUPTI's graph-launch record says;
// eager ops come first, timed by events (on the events' clock, not
// CUPTI's). Without CUPTI every span has replay -1.
func (se *Session) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	return joined(se).tim.ReplaySpans(f)
}

// SetCollectiveTimeout sets how long Sync waits for work of a session
// with collectives before it aborts the communicator and fails, naming a
// lost peer; 0 waits for ever (the context still ends it). Call it after
// Join.
func (se *Session) SetCollectiveTimeout(d time.Duration) {
	joined(se).colls.SetCollectiveTimeout(d)
}

// Join makes the session rank w.Rank of a world of w.Size ranks
// (device.Joiner): ncclCommInitRank with w.UniqueID, on the device the
// graph's collectives run on, which returns once every rank has joined.
// Call it once, after Open and before the streams are made; the ranks of
// one process join from their own goroutines. When ctx ends first, Join
// returns its error, and the communicator, should the other ranks still
// come, is aborted as soon as it is made.
func (se *Session) Join(ctx context.Context, w device.World) error {
	return joined(se).colls.Join(ctx, w)
}

// Rank is the session's rank and world size after Join; ok is false before.
func (se *Session) Rank() (rank, size int, ok bool) {
	return joined(se).colls.Rank()
}

// AbortCollectives aborts the session's communicator, cancelling its work
// in flight, so that the session and its peers stop waiting for each
// other; collectives are refused afterwards. It is safe from any
// goroutine: a process running several ranks calls it on the others when
// one fails. It does nothing before Join.
func (se *Session) AbortCollectives(cause error) {
	joined(se).colls.AbortCollectives(cause)
}

// Sync waits for every stream. With a context that can end it polls, so
// that cancellation returns at once; the work then runs on (a GPU cannot be
// interrupted), host steps not yet started are skipped, and the next run's
// first call, or Close, waits for it.
//
// Errors: a host step's error names its op. A fault that the driver reports
// asynchronously (an illegal address, say) is attributed to the last op run
// on the stream that reported it: the driver says which context failed, not
// which kernel, so the cause may be an earlier op.
func (se *Session) Sync(ctx context.Context) (err error) {
	return joined(se).host.Sync(ctx)
}

// Delay enqueues a pause of about d on stream: the builtin spin kernel,
// one thread busy-waiting on the device, so that the stream's next work
// starts later while the host goes on submitting.
func (se *Session) Delay(si int, d time.Duration) error {
	return joined(se).faults.Delay(si, d)
}

// Fail enqueues a failure on stream: a host callback (never a kernel: a
// kernel's fault would ruin the context) that reports err as op's
// *dag.OpError, which the next Sync returns.
func (se *Session) Fail(si int, op *dag.Op, err error) error {
	return joined(se).faults.Fail(si, op, err)
}
