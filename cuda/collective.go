package cuda

/*
#include <stdlib.h>
#include "nccl.h"

// c_group makes c current (NCCL works on the current device) and issues
// calls as one NCCL group.
static ncclResult_t c_group(dr_api* a, CUcontext c, dr_nccl* n, const dr_nccl_call* calls, int k, int* failed) {
	*failed = -1;
	if (dr_ctx(a, c) != 0) return DR_NCCL_UNHANDLED_CUDA_ERROR;
	return dr_nccl_group(n, calls, k, failed);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Collectives on a session: Join makes the session one rank of an NCCL
// communicator; collective ops then run as NCCL calls on their streams.
//
// Send and recv. NCCL's send and recv block their stream until the peer
// posts the matching call, so two ranks that each send, then receive, on
// one stream would wait for each other forever. The session therefore
// holds back consecutive send and recv ops of one stream and issues them
// as one NCCL group (which NCCL runs as one concurrent exchange) when
// anything else is enqueued on that stream (another op, a Record or Wait),
// at Sync, EndCapture and LaunchGraph. A send or recv whose view overlaps
// one held back, where one of the two writes, starts a new group, since a
// group gives no order between its calls. A plan that puts an event
// record or another op between a send and the recv facing it splits the
// group, and may then deadlock as NCCL does; the planner keeps them
// adjacent on the collective stream. With timing on (SetTiming), each is
// issued alone, so that its events bracket it.
//
// Failure. A rank that fails (an NCCL call or a Sync error, the context
// ending, Close during a run, AbortCollectives) aborts its communicator
// (ncclCommAbort), which cancels its work in flight; its peers then wait
// for it in Sync, which watches ncclCommGetAsyncError and gives up after
// the collective timeout (SetCollectiveTimeout), aborting in turn. After an
// abort the session refuses collectives: open another session and Join.
//
// Capture. NCCL connects ranks lazily, at a collective's first call, and
// that connection cannot be captured: BeginCapture refuses until every
// collective op of the graph has run eagerly and a Sync has succeeded
// since (the executor's warm-up run does that).

// collectives is a session's part in an NCCL communicator.
type collectives struct {
	b    *Backend
	drv  *driver
	g    *dag.Graph
	hold *holdings
	sub  *submitter
	capt *capturer
	tim  *timer

	coll *collState // the NCCL communicator after Join; nil before

	// heldOn is the stream whose sends and recvs are held back (coll.pend),
	// nil when none are: Record, Wait, Run, Sync, EndCapture and
	// LaunchGraph then skip flushP2P.
	heldOn *stream
}

var (
	_ device.Joiner     = (*Session)(nil)
	_ device.UniqueIDer = (*Backend)(nil)
)

// DefaultCollectiveTimeout is how long Sync waits for a session with
// collectives before it declares a peer lost (PyTorch's NCCL default).
const DefaultCollectiveTimeout = 10 * time.Minute

// collState is a session's communicator and what it holds back.
type collState struct {
	nccl    *ncclLib
	dev     *sessDevice
	rank    int
	size    int
	timeout time.Duration

	mu      sync.Mutex // guards comm and failed: AbortCollectives comes from any goroutine
	comm    *ncclComm
	failed  error // why the communicator was aborted
	waiting time.Time

	clean    bool         // nothing enqueued since the last successful Sync
	issued   map[int]bool // collective ops issued eagerly since the last Sync
	warm     map[int]bool // collective ops that ran eagerly and synced
	calls    *C.dr_nccl_call
	capCalls int
	pend     []pendingCall // held back send/recv ops (on collectives.heldOn); their records are calls[0:len(pend)]
	copy     *copyState    // the all-reduces run by copies (copycoll.go); nil: all NCCL's
}

type pendingCall struct {
	op   *dag.Op
	view dag.View
	out  bool // recv: writes view
}

// SetCollectiveTimeout does the work of Session.SetCollectiveTimeout.
func (cm *collectives) SetCollectiveTimeout(d time.Duration) {
	if cm.coll != nil {
		cm.coll.timeout = d
	}
}

// Join does the work of Session.Join.
func (cm *collectives) Join(ctx context.Context, w device.World) error {
	switch {
	case cm.hold.closed:
		return fmt.Errorf("cuda: Join: the session is %w", device.ErrClosed)
	case cm.coll != nil:
		return fmt.Errorf("cuda: Join: the session is rank %d of %d already; join once per session", cm.coll.rank, cm.coll.size)
	case len(cm.sub.streams) > 0:
		return errors.New("cuda: Join: call Join before making streams")
	case w.Size < 1 || w.Rank < 0 || w.Rank >= w.Size:
		return fmt.Errorf("cuda: Join: rank %d of a world of %d ranks", w.Rank, w.Size)
	case len(w.UniqueID) != C.DR_NCCL_UNIQUE_ID_BYTES:
		return fmt.Errorf("cuda: Join: the unique id holds %d bytes; NCCL's holds %d (make it with the backend's UniqueID on rank 0)", len(w.UniqueID), C.DR_NCCL_UNIQUE_ID_BYTES)
	}
	if err := cm.g.CheckWorld(w.Size); err != nil {
		return err
	}
	dev := -1
	nP2P := 0
	for _, op := range cm.g.Ops {
		if !op.Kind.IsCollective() {
			continue
		}
		if dev >= 0 && op.Device != dev {
			return &dag.Error{Op: op.Name, Field: "device", Msg: fmt.Sprintf("runs on device %d, but the rank's other collectives on device %d", op.Device, dev),
				Hint: "a rank's collectives run on one device: its own"}
		}
		dev = op.Device
		if op.Kind.Info().PointToPoint {
			nP2P++
		}
	}
	if dev < 0 {
		dev = 0
		if len(cm.g.Ops) > 0 {
			dev = cm.g.Ops[0].Device
		}
	}
	lib, err := cm.b.loadNCCL()
	if err != nil {
		return fmt.Errorf("cuda: Join: %w", err)
	}
	d, err := cm.hold.device(dev)
	if err != nil {
		return fmt.Errorf("cuda: Join: %w", err)
	}
	var id NCCLUniqueID
	copy(id[:], w.UniqueID)
	var cs *copyState
	if ords := copyOrdinals(cm.g); cm.b.copyColl && len(ords) > 0 {
		// Before NCCL's init, which returns once every rank called it: by
		// then every rank of this process has joined the copy world too.
		cw, err := joinCopyWorld(cm.b, id, w.Size, w.Rank, d.gpu.ordinal, len(ords), d.ctx)
		if err != nil {
			return fmt.Errorf("cuda: Join: %w", err)
		}
		if cw != nil {
			cs = &copyState{world: cw, id: id, colls: map[int]*copyColl{}}
			for opID, k := range ords {
				cs.colls[opID] = &copyColl{ordinal: k}
			}
		}
	}
	leave := func() {
		if cs != nil {
			_ = cm.freeCopies(d, cs) // the Join's own error is the one to report
		}
	}
	type made struct {
		comm *ncclComm
		err  error
	}
	ch := make(chan made, 1)
	gone := make(chan struct{})
	go func() {
		c, err := lib.initRank(cm.drv, d.ctx, w.Size, w.Rank, id, ncclResourcesFor(cm.g, lib.configurable(), cm.b.multi.ncclRes))
		select {
		case ch <- made{c, err}:
		case <-gone:
			if c != nil {
				c.abort()
			}
		}
	}()
	var m made
	select {
	case m = <-ch:
	case <-ctx.Done():
		close(gone)
		select { // it may have finished meanwhile
		case m = <-ch:
			if m.comm != nil {
				m.comm.abort()
			}
		default:
		}
		leave()
		return fmt.Errorf("cuda: Join: rank %d of %d: waiting for the other ranks: %w", w.Rank, w.Size, ctx.Err())
	}
	if m.err != nil {
		leave()
		return fmt.Errorf("cuda: Join: rank %d of %d on device %d: %w", w.Rank, w.Size, dev, m.err)
	}
	if cs != nil && !peered(cm.b, cs.world) {
		leave()
		cs = nil
	}
	if cs != nil {
		if err := cm.prepareCopies(ctx, d, cs, w.Rank, w.Size); err != nil {
			cs.world.fail(err)
			m.comm.abort()
			leave()
			return fmt.Errorf("cuda: Join: rank %d of %d: copy collectives: %w", w.Rank, w.Size, err)
		}
	}
	capCalls := max(nP2P, 1)
	calls := (*C.dr_nccl_call)(C.calloc(C.size_t(capCalls), C.sizeof_dr_nccl_call))
	if calls == nil {
		m.comm.abort()
		leave()
		return errors.New("cuda: Join: out of host memory")
	}
	cm.hold.track(&cm.hold.live.HostAllocs, 1)
	cm.coll = &collState{nccl: lib, dev: d, rank: w.Rank, size: w.Size, timeout: DefaultCollectiveTimeout,
		comm: m.comm, clean: true, issued: map[int]bool{}, warm: map[int]bool{}, calls: calls, capCalls: capCalls, copy: cs}
	return nil
}

// Rank does the work of Session.Rank.
func (cm *collectives) Rank() (rank, size int, ok bool) {
	if cm.coll == nil {
		return 0, 0, false
	}
	return cm.coll.rank, cm.coll.size, true
}

// prepareCollective checks a collective op at Open; its NCCL call is made
// at each Run, once the session has joined a world.
func (cm *collectives) prepareCollective(st *opState, op *dag.Op) error {
	if op.Collective == nil {
		return errors.New("a collective without its parameters (build it with the dag.Builder's methods)")
	}
	for _, a := range op.Access {
		if a.Buf.Placement != dag.Device || a.Buf.Device != op.Device {
			return fmt.Errorf("collectives work on the memory of their own device (%d): %s is not on it", op.Device, a.Buf.Name)
		}
	}
	if _, err := ncclDType(op.Access[0].Buf.DType); err != nil {
		return err
	}
	st.act = actCollective
	return nil
}

// record fills the NCCL call of op, on stream s, into rec; issue sets
// its communicator.
func (cm *collectives) record(rec *C.dr_nccl_call, s *stream, op *dag.Op) error {
	for _, a := range op.Access {
		if cm.hold.bufs[a.Buf.ID].dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", a.Buf.Name)
		}
	}
	dt := op.Access[0].Buf.DType
	ndt, err := ncclDType(dt)
	if err != nil {
		return err
	}
	first := op.Access[0].View
	k := ncclKinds[op.Kind]
	*rec = C.dr_nccl_call{kind: k.call, dtype: ndt, op: C.int(op.Collective.Reduction), stream: s.h}
	rec.send, rec.recv = cm.hold.ptr(first), cm.hold.ptr(first)
	count := first.Size / dt.Size()
	if k.shape != nil {
		count = k.shape(cm.hold, rec, op, count)
	}
	rec.count = C.size_t(count)
	return nil
}

// usable reports why the session cannot issue collectives now, if it
// cannot. The caller holds c.mu.
func (c *collState) usable() error {
	if c.failed != nil {
		return fmt.Errorf("the communicator was aborted (%v): open another session and Join again", c.failed)
	}
	if c.comm == nil || c.comm.comm == nil {
		return fmt.Errorf("the communicator is %w", device.ErrClosed)
	}
	return nil
}

// runCollective issues op's NCCL call on s, or holds a send or recv back
// to group it with its neighbours.
func (cm *collectives) runCollective(s *stream, st *opState) error {
	c := cm.coll
	op := st.op
	if c == nil {
		return errors.New("collectives need the ranks of a world: Join the session to one (the executor's world option) before running")
	}
	c.clean = false
	if cm.capt.capture == nil {
		c.issued[op.ID] = true
	}
	p2p := op.Kind.Info().PointToPoint
	if p2p && !cm.tim.timing {
		pc := pendingCall{op: op, view: op.Access[0].View, out: op.Access[0].Mode.Writes()}
		if cm.heldOn != nil && (cm.heldOn != s || len(c.pend) == c.capCalls || conflicts(c.pend, pc)) {
			if err := cm.issuePending(); err != nil {
				return err
			}
		}
		recs := unsafe.Slice(c.calls, c.capCalls)
		if err := cm.record(&recs[len(c.pend)], s, op); err != nil {
			return err
		}
		c.pend = append(c.pend, pc)
		cm.heldOn = s
		return nil
	}
	if err := cm.issuePending(); err != nil {
		return err
	}
	if cc := c.copyOf(op); cc != nil {
		return cm.runCopy(s, op, cc)
	}
	if err := cm.record(c.calls, s, op); err != nil {
		return err
	}
	return cm.issue(1, func(int) *dag.Op { return op })
}

// conflicts reports whether pc must follow a held-back call rather than
// run beside it.
func conflicts(pend []pendingCall, pc pendingCall) bool {
	for _, p := range pend {
		if (p.out || pc.out) && p.view.Buf == pc.view.Buf && p.view.Overlaps(pc.view) {
			return true
		}
	}
	return false
}

// flushP2P issues the held-back sends and recvs before work of action act
// is enqueued on s (nil: at Sync), unless that work joins them. Callers
// call it only where heldOn is set, so that a session holding nothing back
// pays one nil check per op.
func (cm *collectives) flushP2P(s *stream, act action) error {
	c := cm.coll
	if c == nil || cm.heldOn == nil || (s != nil && s != cm.heldOn) || act == actCollective {
		return nil
	}
	return cm.issuePending()
}

// issuePending issues the held-back calls as one group.
func (cm *collectives) issuePending() error {
	c := cm.coll
	if c == nil || len(c.pend) == 0 {
		return nil
	}
	pend := c.pend
	c.pend, cm.heldOn = c.pend[:0], nil
	return cm.issue(len(pend), func(i int) *dag.Op { return pend[i].op })
}

// issue calls the first n records of c.calls as one group; opOf names the
// op of each for errors. A failed call aborts the communicator.
func (cm *collectives) issue(n int, opOf func(int) *dag.Op) error {
	c := cm.coll
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	recs := unsafe.Slice(c.calls, n)
	for i := range recs {
		recs[i].comm = c.comm.comm
	}
	var failed C.int
	r := C.c_group(cm.drv.api, c.dev.ctx, c.nccl.lib, c.calls, C.int(n), &failed)
	if r == C.DR_NCCL_SUCCESS {
		return nil
	}
	call := "ncclGroupEnd"
	var op *dag.Op
	if failed >= 0 {
		op = opOf(int(failed))
		call = ncclKinds[op.Kind].name
	}
	err := c.nccl.check(call, r)
	c.abortLocked(err)
	if op != nil && n > 1 {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	return err
}

// abortLocked aborts the communicator; the caller holds c.mu.
func (c *collState) abortLocked(cause error) {
	if c.copy != nil {
		c.copy.world.fail(cause)
	}
	if c.comm == nil || c.comm.comm == nil {
		return
	}
	if c.failed == nil {
		c.failed = cause
	}
	c.comm.abort()
}

// AbortCollectives does the work of Session.AbortCollectives.
func (cm *collectives) AbortCollectives(cause error) {
	c := cm.coll
	if c == nil {
		return
	}
	if cause == nil {
		cause = errors.New("aborted")
	}
	c.mu.Lock()
	c.abortLocked(cause)
	c.mu.Unlock()
}

// collWatch runs while Sync waits: it reports an error NCCL found
// asynchronously, or the collective timeout passing, aborting the
// communicator in either case.
func (cm *collectives) collWatch() error {
	c := cm.coll
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return fmt.Errorf("the communicator was aborted: %w", c.failed)
	}
	if c.comm == nil || c.comm.comm == nil {
		return nil
	}
	if err := c.copyFailed(); err != nil {
		c.abortLocked(err)
		return err
	}
	if err := c.comm.asyncError(); err != nil {
		c.abortLocked(err)
		return fmt.Errorf("rank %d of %d: %w (a peer failed or left; the communicator was aborted)", c.rank, c.size, err)
	}
	if c.waiting.IsZero() {
		c.waiting = time.Now()
	}
	if c.timeout > 0 && time.Since(c.waiting) > c.timeout {
		err := fmt.Errorf("rank %d of %d: the run's collectives did not finish within %v: another rank failed, left or never started them; the communicator was aborted (raise the collective timeout if the run is that long)",
			c.rank, c.size, c.timeout)
		c.abortLocked(err)
		return err
	}
	return nil
}

// afterSync ends a Sync: on success the collectives it waited for are
// warm (capturable); on failure, or when ctx ended (even if the work
// finished: the caller may have stopped submitting before this rank's
// collectives), the communicator is aborted so that no peer waits for
// this rank.
func (cm *collectives) afterSync(ctx context.Context, err error) error {
	c := cm.coll
	if c == nil {
		return err
	}
	c.mu.Lock()
	c.waiting = time.Time{}
	c.mu.Unlock()
	if err == nil {
		err = c.copyFailed() // a failed peer released this rank's waits: its results are not a sum
	}
	if err == nil && ctx.Err() == nil {
		c.clean = true
		for id := range c.issued {
			c.warm[id] = true
		}
		clear(c.issued)
		return nil
	}
	cause := err
	if cause == nil || ctx.Err() != nil {
		cause = fmt.Errorf("rank %d abandoned its run: %w", c.rank, ctx.Err())
	}
	cm.AbortCollectives(cause)
	clear(c.issued)
	return err
}

// collCaptureReady reports why the session cannot capture its
// collectives yet, if it cannot.
func (cm *collectives) collCaptureReady() error {
	c := cm.coll
	for _, op := range cm.g.Ops {
		if !op.Kind.IsCollective() {
			continue
		}
		if c == nil {
			return &dag.OpError{Op: op.Name, Err: errors.New("collectives need the ranks of a world: Join the session before capturing")}
		}
		if !c.warm[op.ID] {
			return &dag.OpError{Op: op.Name, Err: errors.New("NCCL connects ranks at a collective's first call, which a graph cannot capture: run the plan eagerly once (and Sync) before capturing it")}
		}
	}
	return nil
}

// closeComm ends the communicator at Close: ncclCommDestroy when the last
// run finished cleanly, ncclCommAbort when work may be in flight or a peer
// may be waiting.
func (cm *collectives) closeComm() error {
	c := cm.coll
	if c == nil {
		return nil
	}
	c.pend, cm.heldOn = nil, nil
	c.mu.Lock()
	var err error
	if c.comm != nil && c.comm.comm != nil {
		if c.clean && c.failed == nil {
			err = c.comm.destroy()
		} else {
			err = c.comm.abort()
		}
	}
	c.mu.Unlock()
	if c.copy != nil && (!c.clean || c.failed != nil) {
		c.copy.world.fail(errors.New("a rank closed its session during a run"))
	}
	if c.copy != nil {
		err = errors.Join(err, cm.freeCopies(c.dev, c.copy))
		c.copy = nil
	}
	if c.calls != nil {
		C.free(unsafe.Pointer(c.calls))
		c.calls = nil
		cm.hold.track(&cm.hold.live.HostAllocs, -1)
	}
	return err
}

// ncclResourcesFor is what a communicator for graph g takes: res, where
// NCCL (the backend's option) bounds its CTAs; else, where g's GEMMs
// leave SMs to the collectives beside them (dag.GemmSpec.LeaveSMs, the
// planner's CollectiveSMs), at most that many CTAs, so that neither waits
// on SMs the other holds, where the library can bound them (configurable:
// NCCL 2.17 and later).
func ncclResourcesFor(g *dag.Graph, configurable bool, res NCCLResources) NCCLResources {
	if res.MaxCTAs != 0 || !configurable {
		return res
	}
	for _, op := range g.Ops {
		if op != nil && op.Gemm != nil {
			res.MaxCTAs = max(res.MaxCTAs, op.Gemm.LeaveSMs)
		}
	}
	return res
}
