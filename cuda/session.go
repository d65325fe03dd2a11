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
	"sync"
	"sync/atomic"
	"unsafe"

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
type Session struct {
	b      *Backend
	drv    *driver
	timing bool

	cupti     *cuptiTiming // timing by CUPTI records (timing.go); nil for events
	stretch   []C.dr_step  // Submit's plain steps, reused (stretch.go)
	timingWhy string       // why the timing source is what it is
	// cuptiWas is the closed tracer's source and drop count, which
	// TimingSource still reports after Close.
	cuptiWas struct {
		source  device.TimingSource
		dropped uint64
	}

	g       *dag.Graph
	devs    map[int]*sessDevice
	bufs    []buffer  // by Buffer.ID
	ops     []opState // by Op.ID
	streams []stream
	events  []event
	closed  bool
	faults  faultState // faults.go

	liveMu sync.Mutex // Live may be called from another goroutine (Backend.Live)
	live   Resources

	// Host steps run on driver threads; they read hostCtx and report here.
	hostCtx    context.Context
	hostCancel context.CancelFunc
	abandoned  atomic.Bool
	waiters    sync.WaitGroup // cancellable Syncs' waiters (sync.go)
	hostMu     sync.Mutex
	hostErr    error

	timed     []timedOp
	spanEvs   []C.CUevent // Spans' scratch: the events of one device's timed ops
	spanAt    []int       // ... the index in timed of each pair of them
	spanDevMs []float32   // ... and their times
	spanMs    []float32   // the start and end of every timed op

	// Graph capture (graph.go).
	graphs   []*graph // by number; nil once destroyed
	capture  *capture // the capture in progress, if any
	gstats   GraphStats
	variants map[*dag.Op]*opState // C records of op variants that captured host nodes point at

	gemm *gemmer // cuBLASLt handles, algorithms and workspaces, made at the first gemm

	coll    *collState       // the NCCL communicator after Join (collective.go)
	stages  map[int]*stage   // NoPeer's staging buffers, by op ID (peer_session.go)
	staging []*stagingStream // ... and the helper streams of their pipelines
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
)

// sessDevice is a device as one session uses it: the backend's device,
// the session's own copy of the functions it launches there (read without
// the backend's lock), and its timing events.
type sessDevice struct {
	*gpu
	funcs        map[*dag.Kernel]C.CUfunction
	fill64       C.CUfunction
	timingEvents []C.CUevent // recorded ones come back here after Spans
	origin       C.CUevent   // the current run's time origin; nil before its first op
}

type stream struct {
	h    C.CUstream
	dev  *sessDevice
	last string // the name of the last op run on it, for asynchronous errors
}

type event struct {
	h   C.CUevent
	dev *sessDevice
}

// Live reports what the session holds now.
func (se *Session) Live() Resources {
	se.liveMu.Lock()
	defer se.liveMu.Unlock()
	return se.live
}

// track adds d to the count n of se.live.
func (se *Session) track(n *int, d int) {
	se.liveMu.Lock()
	*n += d
	se.liveMu.Unlock()
}

// device returns device ordinal as the session uses it.
func (se *Session) device(ordinal int) (*sessDevice, error) {
	if d := se.devs[ordinal]; d != nil {
		return d, nil
	}
	d, err := se.b.device(ordinal)
	if err != nil {
		return nil, err
	}
	sd := &sessDevice{gpu: d, funcs: map[*dag.Kernel]C.CUfunction{}}
	se.devs[ordinal] = sd
	return sd, nil
}

// open loads the kernels g launches and allocates its persistent buffers
// with their initial contents. On error the caller closes the session.
func (se *Session) open(ctx context.Context) error {
	g := se.g
	se.hostCtx, se.hostCancel = context.WithCancel(context.WithoutCancel(ctx))
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
	for _, op := range g.Ops {
		if op.Device >= count {
			return &dag.Error{Op: op.Name, Field: "device", Msg: fmt.Sprintf("device %d does not exist: this machine has %d", op.Device, count),
				Hint: fmt.Sprintf("use a device from 0 to %d", count-1)}
		}
	}
	if err := se.loadKernels(ctx); err != nil {
		return err
	}
	if err := se.allocBuffers(ctx); err != nil {
		return err
	}
	se.ops = make([]opState, len(g.Ops))
	for i, op := range g.Ops {
		if op.ID != i {
			return &dag.Error{Op: op.Name, Msg: fmt.Sprintf("has ID %d at index %d", op.ID, i), Hint: "pass a graph made by dag.Builder.Build"}
		}
		if err := se.prepare(&se.ops[i], op); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	return nil
}

// syncAll waits for every stream of the session: only its own work, never
// another session's (a cuCtxSynchronize would wait for theirs too, and
// break their captures).
func (se *Session) syncAll() error {
	defer se.waiters.Wait() // a cancelled Sync's waiter (sync.go) returns with the work
	var errs []error
	for i := range se.streams {
		s := &se.streams[i]
		if err := se.drv.streamSync(s.dev.ctx, s.h); err != nil {
			errs = append(errs, fmt.Errorf("stream %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Read returns the contents of a persistent buffer; call it after Sync.
func (se *Session) Read(buf *dag.Buffer) ([]byte, error) {
	if se.closed || buf == nil || buf.ID < 0 || buf.ID >= len(se.bufs) || se.bufs[buf.ID].b != buf {
		return nil, fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return nil, fmt.Errorf("cuda: buffer %q is temporary: it has no contents after a run (make it persistent to read it)", buf.Name)
	}
	bs := &se.bufs[buf.ID]
	out := make([]byte, buf.Size)
	if buf.Placement == dag.Device {
		if err := se.drv.dtoh(bs.dev.ctx, out, bs.dptr); err != nil {
			return nil, fmt.Errorf("reading buffer %q: %w", buf.Name, err)
		}
		return out, nil
	}
	copy(out, unsafe.Slice((*byte)(bs.host), buf.Size))
	return out, nil
}

// Write replaces the contents of persistent buffer buf with data, which
// must be buf's size: a new input between runs or graph replays. Call it
// when the work that uses buf is done (after Sync).
func (se *Session) Write(buf *dag.Buffer, data []byte) error {
	if se.closed || buf == nil || buf.ID < 0 || buf.ID >= len(se.bufs) || se.bufs[buf.ID].b != buf {
		return fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return fmt.Errorf("cuda: buffer %q is temporary: it exists only inside a run (write a persistent buffer and copy it in)", buf.Name)
	}
	if int64(len(data)) != buf.Size {
		return fmt.Errorf("cuda: writing %d bytes into buffer %q of %d bytes: write the whole buffer", len(data), buf.Name, buf.Size)
	}
	bs := &se.bufs[buf.ID]
	if buf.Placement == dag.Device {
		if err := se.drv.htod(bs.dev.ctx, bs.dptr, data); err != nil {
			return fmt.Errorf("writing buffer %q: %w", buf.Name, err)
		}
		return nil
	}
	copy(unsafe.Slice((*byte)(bs.host), buf.Size), data)
	return nil
}

// Close waits for the session's streams to finish, then releases its
// graphs, streams, events, buffers and C records: exactly what it made.
// It reports the first failure but releases everything it can. Closing
// twice does nothing.
func (se *Session) Close() error {
	if se.closed || se.unopened() != nil { // faults.go: a zero Session holds nothing
		return nil
	}
	se.closed = true
	defer se.b.forget(se)
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	se.closeGraphs(keep)
	keep(se.closeComm())
	keep(se.syncAll())
	se.closeFaults() // faults.go
	keep(se.closeGemm())
	if se.hostCancel != nil {
		se.hostCancel()
	}
	for i := range se.bufs {
		bs := &se.bufs[i]
		switch {
		case bs.dptr != 0:
			keep(se.drv.memFree(bs.dev.ctx, bs.dptr))
			if bs.b.Temporary {
				se.track(&se.live.PoolAllocs, -1)
			} else {
				se.track(&se.live.DeviceAllocs, -1)
			}
		case bs.host != nil && bs.b.Placement == dag.Pinned:
			keep(se.drv.hostFree(bs.dev.ctx, bs.host))
			se.track(&se.live.PinnedAllocs, -1)
		case bs.host != nil:
			C.free(bs.host)
			se.track(&se.live.HostAllocs, -1)
		}
	}
	for i := range se.ops {
		st := &se.ops[i]
		if st.launch != nil {
			C.free(unsafe.Pointer(st.launch))
			se.track(&se.live.HostAllocs, -1)
		}
		if st.work != nil {
			C.free(unsafe.Pointer(st.work))
			se.track(&se.live.HostAllocs, -1)
		}
		if st.act == actHostFunc && st.handle != 0 {
			st.handle.Delete()
			se.track(&se.live.Callbacks, -1)
		}
	}
	for _, st := range se.variants {
		se.dropVariant(st)
	}
	se.variants = nil
	for _, s := range se.streams {
		keep(se.drv.streamDestroy(s.dev.ctx, s.h))
		se.track(&se.live.Streams, -1)
	}
	for _, e := range se.events {
		if e.h != nil {
			keep(se.drv.eventDestroy(e.dev.ctx, e.h))
			se.track(&se.live.Events, -1)
		}
	}
	se.freeStages(keep)
	se.recycleTiming()
	keep(se.closeCUPTI())
	for _, d := range se.devs {
		for _, e := range d.timingEvents {
			keep(se.drv.eventDestroy(d.ctx, e))
			se.track(&se.live.Events, -1)
		}
		d.timingEvents = nil
	}
	se.devs, se.bufs, se.ops, se.streams, se.events, se.timed = nil, nil, nil, nil, nil, nil
	se.hostCtx, se.hostCancel, se.hostErr = nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("cuda: closing the session: %w", errors.Join(errs...))
	}
	return nil
}
