package cuda

/*
#include <stdlib.h>
#include "cuda.h"

#define DR_CC_MAX_RANKS 8
#define DR_CC_WAIT_EQ 0x1 // CU_STREAM_WAIT_VALUE_EQ

// dr_cc_op is one rank's all-reduce by copies: its view and its peers',
// the shards each rank reduces, its scratch and its add launches.
typedef struct {
	int size, rank;
	CUdeviceptr flags;                  // this collective's 3 x size x size flags, 4 bytes each
	CUdeviceptr views[DR_CC_MAX_RANKS]; // each rank's view, this rank's at rank
	size_t shard[DR_CC_MAX_RANKS + 1];  // byte offsets of the shards
	CUdeviceptr scratch;                // (size - 1) shards of this rank's
	dr_launch* adds[DR_CC_MAX_RANKS];   // own shard += scratch shard, peer by peer
} dr_cc_op;

// The flag that rank src raises for rank dst in phase p: 0, src's view is
// ready to be read; 1, src's shard is reduced and src no longer reads
// dst's view before the gather; 2, src no longer reads dst's view.
static CUdeviceptr cc_flag(const dr_cc_op* o, int p, int dst, int src) {
	return o->flags + 4 * (((CUdeviceptr)p * o->size + dst) * o->size + src);
}

static CUresult cc_raise(dr_api* a, CUstream s, const dr_cc_op* o, int p) {
	for (int j = 0; j < o->size; j++) {
		if (j == o->rank) continue;
		CUresult r = a->cuStreamWriteValue32(s, cc_flag(o, p, j, o->rank), 1, 0);
		if (r != DR_SUCCESS) return r;
	}
	return DR_SUCCESS;
}

// cc_await waits for peer j's flag of phase p and lowers it again: the
// waiter lowers its own flags, so a flag is raised again only after the
// phase that lowered it (the protocol's next phase needs this rank).
static CUresult cc_await(dr_api* a, CUstream s, const dr_cc_op* o, int p, int j) {
	CUresult r = a->cuStreamWaitValue32(s, cc_flag(o, p, o->rank, j), 1, DR_CC_WAIT_EQ);
	if (r != DR_SUCCESS) return r;
	return a->cuStreamWriteValue32(s, cc_flag(o, p, o->rank, j), 0, 0);
}

// dr_cc_all_reduce enqueues o on s: a reduce-scatter (each rank copies
// its shard of every peer's view and adds them into its own) and an
// all-gather (each rank copies every peer's reduced shard), each step
// ordered across ranks by flags in host memory that the streams raise and
// wait on, so no SM waits and no host thread takes part.
static CUresult dr_cc_all_reduce(dr_api* a, CUcontext c, CUstream s, const dr_cc_op* o) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS || (r = cc_raise(a, s, o, 0)) != DR_SUCCESS) return r;
	size_t off = o->shard[o->rank], n = o->shard[o->rank + 1] - off;
	for (int j = 0, k = 0; j < o->size; j++) {
		if (j == o->rank) continue;
		if ((r = cc_await(a, s, o, 0, j)) != DR_SUCCESS) return r;
		if (n > 0 && (r = a->cuMemcpyAsync(o->scratch + k * n, o->views[j] + off, n, s)) != DR_SUCCESS) return r;
		k++;
	}
	for (int k = 0; k < o->size - 1 && n > 0; k++) {
		if ((r = dr_launch_kernel(a, c, o->adds[k], s)) != DR_SUCCESS) return r;
	}
	if ((r = cc_raise(a, s, o, 1)) != DR_SUCCESS) return r;
	for (int j = 0; j < o->size; j++) {
		if (j == o->rank) continue;
		if ((r = cc_await(a, s, o, 1, j)) != DR_SUCCESS) return r;
		size_t jo = o->shard[j], jn = o->shard[j + 1] - jo;
		if (jn > 0 && (r = a->cuMemcpyAsync(o->views[o->rank] + jo, o->views[j] + jo, jn, s)) != DR_SUCCESS) return r;
	}
	if ((r = cc_raise(a, s, o, 2)) != DR_SUCCESS) return r;
	for (int j = 0; j < o->size; j++) {
		if (j != o->rank && (r = cc_await(a, s, o, 2, j)) != DR_SUCCESS) return r;
	}
	return DR_SUCCESS;
}

static int dr_cc_has_memops(dr_api* a) { return a->cuStreamWaitValue32 != NULL && a->cuStreamWriteValue32 != NULL; }
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Copy collectives. NCCL's all-reduce runs on SMs, which it takes from
// the GEMMs beside it when the planner overlaps the two. Between ranks of
// one process whose devices reach each other's memory, a sum all-reduce
// of a persistent buffer can instead run on the copy engines: each rank
// copies its shard of every peer's view (a peer read over NVLink), adds
// them into its own view with the builtin add kernel (the only SM work: a
// pass over one shard per peer), then copies every peer's reduced shard.
// The ranks' streams order the steps through flags in mapped host memory
// (cuStreamWriteValue32 and cuStreamWaitValue32, done by the device's
// front end, captured into graphs as memory-operation nodes), so neither a
// host thread nor an SM waits. The CopyCollectives option asks for it;
// every other collective, and an all-reduce this cannot run, stays NCCL's.
//
// Safety across runs: a flag is lowered by the rank that waits on it, and
// the rank that raises it raises it again only in the next run, after the
// phase in which the waiter had to take part; the last phase (each rank
// waits until no peer reads its view) keeps a rank's later ops from
// writing a view a peer still copies.

// copyWorld is what the ranks of one world in this process share.
type copyWorld struct {
	size  int
	ncoll int            // copy collectives of each rank's program, at least 1
	flags unsafe.Pointer // nflags flags, mapped (its device address is the same)

	// Backend.mu guards devs and users.
	devs  []int // each rank's device ordinal; -1 until it joins
	users int

	mu sync.Mutex // guards what follows
	// views holds each rank's view of each copy collective, published as
	// the rank joins: rank*ncoll + ordinal.
	views  []C.CUdeviceptr
	failed error
}

// nflags is the number of flags: 3 x size x size per collective
// (dr_cc_op.flags).
func (cw *copyWorld) nflags() int { return cw.ncoll * 3 * cw.size * cw.size }

// copyColl is a session's state of one copy collective.
type copyColl struct {
	ordinal int
	rec     *C.dr_cc_op
	own     C.CUdeviceptr // this rank's view when it joined
}

// copyEligible reports whether op can run as a copy all-reduce: every
// rank decides the same from its own op.
func copyEligible(op *dag.Op) bool {
	if op.Kind != dag.AllReduce || op.Collective == nil || op.Collective.Reduction != dag.Sum {
		return false
	}
	v := op.Access[0].View
	return !v.Buf.Temporary && dag.Add.Variant(v.Buf.DType) != nil && v.Size%v.Buf.DType.Size() == 0
}

// copyOrdinals numbers g's copy-eligible collectives, by op ID, in the
// order every rank issues them.
func copyOrdinals(g *dag.Graph) map[int]int {
	out := map[int]int{}
	for _, op := range g.Ordered() {
		if copyEligible(op) {
			out[op.ID] = len(out)
		}
	}
	return out
}

// joinCopyWorld registers rank of a world of size on device dev with the
// backend's copy world of id, making it when this is the first rank.
func joinCopyWorld(b *Backend, id NCCLUniqueID, size, rank, dev, ncoll int, ctx C.CUcontext) (*copyWorld, error) {
	if size > C.DR_CC_MAX_RANKS {
		return nil, nil
	}
	if C.dr_cc_has_memops(b.drv.api) == 0 {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.copyWorlds == nil {
		b.copyWorlds = map[NCCLUniqueID]*copyWorld{}
	}
	cw := b.copyWorlds[id]
	if cw == nil {
		cw = &copyWorld{size: size, ncoll: ncoll, devs: make([]int, size), views: make([]C.CUdeviceptr, size*ncoll)}
		n := int64(cw.nflags()) * 4
		p, err := b.drv.memHostAlloc(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("the flags of copy collectives: %w", err)
		}
		clear(unsafe.Slice((*byte)(p), n))
		b.live.PinnedAllocs++
		cw.flags = p
		for i := range cw.devs {
			cw.devs[i] = -1
		}
		b.copyWorlds[id] = cw
	}
	if cw.size != size || cw.ncoll != ncoll {
		return nil, fmt.Errorf("rank %d: a world of %d ranks with %d copy collectives, but another rank joined one of %d with %d", rank, size, ncoll, cw.size, cw.ncoll)
	}
	cw.devs[rank] = dev
	cw.users++
	return cw, nil
}

// leaveCopyWorld drops a rank's hold on cw, freeing its flags with the last.
func leaveCopyWorld(b *Backend, id NCCLUniqueID, cw *copyWorld, ctx C.CUcontext) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	cw.users--
	if cw.users > 0 {
		return nil
	}
	delete(b.copyWorlds, id)
	b.live.PinnedAllocs--
	return b.drv.memFreeHost(ctx, cw.flags)
}

// peered reports whether every rank's device reaches every other's memory
// (or is the same device). Every rank asks once all have joined, and so
// decides the same.
func peered(b *Backend, cw *copyWorld) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, i := range cw.devs {
		for _, j := range cw.devs {
			if i < 0 || j < 0 || i != j && !b.multi.peer[[2]int{i, j}] {
				return false
			}
		}
	}
	return true
}

// fail makes every rank's waits on cw's flags return: a rank failed, and
// its peers must not wait for it on the device.
func (cw *copyWorld) fail(cause error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.failed == nil {
		cw.failed = cause
	}
	flags := unsafe.Slice((*uint32)(cw.flags), cw.nflags())
	for i := range flags {
		flags[i] = 1
	}
}

func (cw *copyWorld) err() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.failed
}

// publish stores rank's views of the copy collectives (by ordinal) and
// returns every rank's, rank by rank, once all have published theirs.
func (cw *copyWorld) publish(ctx context.Context, rank int, own []C.CUdeviceptr) ([][]C.CUdeviceptr, error) {
	cw.mu.Lock()
	copy(cw.views[rank*cw.ncoll:], own)
	cw.mu.Unlock()
	for {
		cw.mu.Lock()
		failed, all := cw.failed, !slices.Contains(cw.views, 0)
		views := make([][]C.CUdeviceptr, cw.size)
		for j := range views {
			views[j] = slices.Clone(cw.views[j*cw.ncoll : (j+1)*cw.ncoll])
		}
		cw.mu.Unlock()
		switch {
		case failed != nil:
			return nil, fmt.Errorf("another rank failed: %w", failed)
		case all:
			return views, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the other ranks' views: %w", ctx.Err())
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// copyState is a session's part in a copy world.
type copyState struct {
	world *copyWorld
	id    NCCLUniqueID
	colls map[int]*copyColl // by op ID
}

// prepareCopies readies cs's collectives at Join, with every rank
// joining: it publishes this rank's views and takes the peers', allocates
// the scratch and loads the add kernels, so that a run makes no call that
// could wait for a device while a peer's stream waits for this rank.
func (cm *collectives) prepareCopies(ctx context.Context, d *sessDevice, cs *copyState, rank, size int) error {
	own := make([]C.CUdeviceptr, cs.world.ncoll)
	for id, cc := range cs.colls {
		v := cm.g.Ops[id].Access[0].View
		if cm.hold.bufs[v.Buf.ID].dptr == 0 {
			return fmt.Errorf("%s: its buffer %s is not allocated", cm.g.Ops[id].Name, v.Buf.Name)
		}
		cc.own = cm.hold.ptr(v)
		own[cc.ordinal] = cc.own
	}
	views, err := cs.world.publish(ctx, rank, own)
	if err != nil {
		return err
	}
	for id, cc := range cs.colls {
		peers := make([]C.CUdeviceptr, size)
		for j := range peers {
			peers[j] = views[j][cc.ordinal]
		}
		if err := cm.prepareCopy(d, cm.g.Ops[id], cc, cs.world, peers, rank, size); err != nil {
			return &dag.OpError{Op: cm.g.Ops[id].Name, Err: err}
		}
	}
	return nil
}

// runCopy enqueues op's all-reduce by copies on s.
func (cm *collectives) runCopy(s *stream, op *dag.Op, cc *copyColl) error {
	c := cm.coll
	if err := c.copyLaunchable(cm.tim.timing); err != nil {
		return err
	}
	if cm.hold.ptr(op.Access[0].View) != cc.own {
		return errors.New("its view moved since the session joined its world (a rebound buffer), which a copy all-reduce cannot follow: run it without cuda.CopyCollectives")
	}
	return cm.drv.check("cuStreamWaitValue32", C.dr_cc_all_reduce(cm.drv.api, s.dev.ctx, s.h, cc.rec))
}

// prepareCopy fills cc's record: the shards, the scratch, the add launches.
func (cm *collectives) prepareCopy(d *sessDevice, op *dag.Op, cc *copyColl, cw *copyWorld, views []C.CUdeviceptr, rank, size int) error {
	v := op.Access[0].View
	dt := v.Buf.DType
	count := v.Size / dt.Size()
	rec := (*C.dr_cc_op)(C.calloc(1, C.sizeof_dr_cc_op))
	if rec == nil {
		return errors.New("out of host memory")
	}
	cc.rec = rec
	cm.hold.track(&cm.hold.live.HostAllocs, 1)
	rec.size, rec.rank = C.int(size), C.int(rank)
	rec.flags = C.CUdeviceptr(uintptr(cw.flags)) + C.CUdeviceptr(cc.ordinal*3*size*size*4)
	for j, p := range views {
		rec.views[j] = p
	}
	for j := range size + 1 {
		rec.shard[j] = C.size_t(count * int64(j) / int64(size) * dt.Size())
	}
	n := int64(rec.shard[rank+1] - rec.shard[rank])
	if n == 0 {
		return nil
	}
	var err error
	if rec.scratch, err = cm.drv.memAlloc(d.ctx, n*int64(size-1)); err != nil {
		return fmt.Errorf("its scratch: %w", err)
	}
	cm.hold.track(&cm.hold.live.DeviceAllocs, 1)
	k := dag.Add.Variant(dt)
	f, ok := d.funcs[k]
	if !ok {
		if f, err = cm.b.kernel(d.gpu, k); err != nil {
			return fmt.Errorf("builtin %s: %w", k.Name, err)
		}
		d.funcs[k] = f
	}
	elems := n / dt.Size()
	own := rec.views[rank] + C.CUdeviceptr(rec.shard[rank])
	for i := range size - 1 {
		l := C.dr_launch_new(6)
		if l == nil {
			return errors.New("out of host memory")
		}
		rec.adds[i] = l
		cm.hold.track(&cm.hold.live.HostAllocs, 1)
		l.f = f
		l.gx, l.gy, l.gz = C.uint(min(max((elems+2047)/2048, 1), 1<<16)), 1, 1
		l.bx, l.by, l.bz = 256, 1, 1
		slots := unsafe.Slice(l.slots, 6)
		slots[0], slots[2], slots[4] = C.uint64_t(own), C.uint64_t(own), C.uint64_t(rec.scratch+C.CUdeviceptr(int64(i)*n))
		slots[1], slots[3], slots[5] = C.uint64_t(elems), C.uint64_t(elems), C.uint64_t(elems)
	}
	return nil
}

// freeCopies frees cs's collectives and leaves its world.
func (cm *collectives) freeCopies(d *sessDevice, cs *copyState) error {
	var errs []error
	for _, cc := range cs.colls {
		if cc.rec == nil {
			continue
		}
		for i := range cc.rec.size - 1 {
			if l := cc.rec.adds[i]; l != nil {
				C.free(unsafe.Pointer(l))
				cm.hold.track(&cm.hold.live.HostAllocs, -1)
			}
		}
		if cc.rec.scratch != 0 {
			errs = append(errs, cm.drv.memFree(d.ctx, cc.rec.scratch))
			cm.hold.track(&cm.hold.live.DeviceAllocs, -1)
		}
		C.free(unsafe.Pointer(cc.rec))
		cm.hold.track(&cm.hold.live.HostAllocs, -1)
		cc.rec = nil
	}
	errs = append(errs, leaveCopyWorld(cm.b, cs.id, cs.world, d.ctx))
	return errors.Join(errs...)
}

// copyOf is op's copy collective, nil when NCCL runs it.
func (c *collState) copyOf(op *dag.Op) *copyColl {
	if c.copy == nil {
		return nil
	}
	return c.copy.colls[op.ID]
}

// copyLaunchable reports why work holding copy collectives cannot be
// enqueued now, if it cannot: the communicator was aborted or a peer
// failed (a stream would wait for flags no rank raises again), or the run
// is timed or traced.
func (c *collState) copyLaunchable(timed bool) error {
	if c == nil || c.copy == nil {
		return nil
	}
	if timed {
		// A traced run of the tensor-parallel block by copies never ended
		// on the 2xH200 (one rank's CUPTI flush waiting for its device,
		// whose stream waits for the other rank, whose launches wait for
		// CUPTI, is the likely cycle): refused rather than hung.
		return errors.New("a run timed or traced cannot use copy collectives: run it untraced, or without cuda.CopyCollectives (DAGRUN_COPY_COLLECTIVES)")
	}
	c.mu.Lock()
	err := c.usable()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.copyFailed()
}

// copyFailed reports a peer's failure in the copy world, if any.
func (c *collState) copyFailed() error {
	if c.copy == nil {
		return nil
	}
	if err := c.copy.world.err(); err != nil {
		return fmt.Errorf("rank %d of %d: another rank failed during a copy all-reduce: %w", c.rank, c.size, err)
	}
	return nil
}
