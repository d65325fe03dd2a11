package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// stager copies between devices through pinned host memory where peer
// access is off.
type stager struct {
	b    *Backend
	drv  *driver
	hold *holdings

	stages  map[int]*stage   // NoPeer's staging buffers, by op ID
	staging []*stagingStream // ... and the helper streams of their pipelines
}

var (
	_ device.Describer  = (*Backend)(nil)
	_ device.Topologist = (*Backend)(nil)
)

// Peer access and the backend's side of collectives: which devices reach
// each other's memory, and the NCCL library, loaded at the first Join.

// multiGPU is the backend's multi-device state: the peer access it enabled
// and NCCL. Its fields are guarded by Backend.mu, except the NCCL ones,
// which ncclOnce guards.
type multiGPU struct {
	noPeer  bool
	libnccl string
	ncclRes NCCLResources   // NCCL
	peer    map[[2]int]bool // [from, to] ordinals: from's context reaches to's memory

	ncclOnce sync.Once
	nccl     *ncclLib
	ncclErr  error
}

// Topology opens every visible device (retaining its primary context and
// enabling peer access as the first Open on it would) and reports which
// pairs have peer access.
func (b *Backend) Topology() (Topology, error) {
	if b == nil || b.drv == nil {
		return Topology{}, errors.New("cuda: Topology: the backend was not made by cuda.New")
	}
	n, err := b.drv.deviceCount()
	if err != nil {
		return Topology{}, err
	}
	for i := range n {
		if _, err := b.device(i); err != nil {
			return Topology{}, fmt.Errorf("cuda: Topology: device %d: %w", i, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := Topology{Peer: map[[2]int]bool{}}
	for o := range b.devs {
		t.Devices = append(t.Devices, o)
	}
	slices.Sort(t.Devices)
	for k, v := range b.multi.peer {
		t.Peer[k] = v
	}
	return t, nil
}

// TopologyOf is Topology for the given devices alone: it opens only them
// (a plan's devices), so that a plan on some devices of a larger machine
// retains no context on the others, each of which costs 100 ms or more
// to create. Pairs with a device not given report no peer access.
func (b *Backend) TopologyOf(devices ...int) (Topology, error) {
	if b == nil || b.drv == nil {
		return Topology{}, errors.New("cuda: TopologyOf: the backend was not made by cuda.New")
	}
	n, err := b.drv.deviceCount()
	if err != nil {
		return Topology{}, err
	}
	for _, i := range devices {
		if i < 0 || i >= n {
			return Topology{}, fmt.Errorf("cuda: TopologyOf: device %d does not exist: this machine has %d", i, n)
		}
		if _, err := b.device(i); err != nil {
			return Topology{}, fmt.Errorf("cuda: TopologyOf: device %d: %w", i, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := Topology{Peer: map[[2]int]bool{}}
	for _, o := range devices {
		if !slices.Contains(t.Devices, o) {
			t.Devices = append(t.Devices, o)
		}
	}
	slices.Sort(t.Devices)
	for k, v := range b.multi.peer {
		if slices.Contains(t.Devices, k[0]) && slices.Contains(t.Devices, k[1]) {
			t.Peer[k] = v
		}
	}
	return t, nil
}

// addPeers runs, under b.mu, when device d is first used: it enables peer
// access between d and every device already in use, both directions,
// where the hardware allows, and opens each device's memory pool to the
// devices that reach it. With NoPeer it does nothing.
func (b *Backend) addPeers(d *gpu) error {
	if b.multi.noPeer || len(b.devs) < 2 {
		return nil
	}
	ords := make([]int, 0, len(b.devs))
	for o := range b.devs {
		ords = append(ords, o)
	}
	slices.Sort(ords)
	devs := make([]C.CUdevice, len(ords))
	ctxs := make([]C.CUcontext, len(ords))
	for i, o := range ords {
		devs[i], ctxs[i] = b.devs[o].info.dev, b.devs[o].ctx
	}
	m, err := b.drv.enablePeerAccess(devs, ctxs)
	if b.multi.peer == nil {
		b.multi.peer = map[[2]int]bool{}
	}
	for i := range m {
		for j := range m[i] {
			if m[i][j] {
				b.multi.peer[[2]int{ords[i], ords[j]}] = true
			}
		}
	}
	if err != nil {
		return fmt.Errorf("enabling peer access for device %d: %w", d.ordinal, err)
	}
	for i, o := range ords {
		g := b.devs[o]
		if g.pool == nil {
			continue
		}
		if err := b.drv.pools.peerAccess(g.ctx, g.pool, i, devs, m); err != nil {
			return fmt.Errorf("opening device %d's memory pool to its peers: %w", o, err)
		}
	}
	return nil
}

// loadNCCL loads NCCL once per backend. Like the driver, it stays loaded
// for the life of the process: its threads may outlive a communicator.
func (b *Backend) loadNCCL() (*ncclLib, error) {
	b.multi.ncclOnce.Do(func() {
		candidates := ncclCandidates(os.Getenv("DAGRUN_LIBNCCL"))
		if p := b.multi.libnccl; p != "" {
			candidates = ncclCandidates(p)[:1]
		}
		b.multi.nccl, b.multi.ncclErr = openNCCL(candidates)
	})
	return b.multi.nccl, b.multi.ncclErr
}

// UniqueID makes the NCCL unique id that rank 0 hands to every rank
// (device.UniqueIDer). It loads NCCL; the error matches ErrNoNCCL when
// there is none.
func (b *Backend) UniqueID() ([]byte, error) {
	n, err := b.loadNCCL()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	id, err := n.uniqueID()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return id[:], nil
}

// A copy between devices through host memory goes in chunks of
// stageChunk bytes through stageSlots pinned slots, down from the source
// device and up into the destination at once: about the speed of the
// slower direction instead of half of it. 8 MiB chunks keep the 5 driver
// calls per chunk under a thousandth of the copy's time.
const (
	stageChunk = 8 << 20
	stageSlots = 4
)

// stage is what one copy between devices needs under NoPeer: its pinned
// buffer and, for a copy of more than one chunk, what pipelines the two
// directions from whichever end's stream the op runs on: a helper stream
// on each end and the events that order the chunks.
type stage struct {
	p     unsafe.Pointer
	size  int64 // of p: min(copy, stageSlots chunks)
	ctx   C.CUcontext
	chunk int64
	// The pipeline. ends are the source and destination devices; an op on
	// ends[i]'s stream copies down (device to host) when i is 0 and up
	// otherwise, and the helper on the other end does the other half.
	// start[i] and done[i] are events of ends[i]'s context: start is
	// recorded by the op's stream, done by the helper's. full is of the
	// source's context, empty of the destination's.
	ends    [2]*sessDevice
	helpers [2]*stagingStream
	start   [2]C.CUevent
	done    [2]C.CUevent
	full    [stageSlots]C.CUevent
	empty   [stageSlots]C.CUevent
	owned   []devEvent // every event above, to destroy at Close
}

// stagingStream is a session's stream on one device for the halves of its
// staged copies that the op's own stream does not do.
type stagingStream struct {
	dev *sessDevice
	h   C.CUstream
}

// preparePeerCopy prepares a copy between two devices: one cuMemcpyAsync,
// which unified addressing routes over the link where peer access is on
// and stream capture accepts (cuMemcpyPeerAsync it refuses), or, under
// NoPeer, copies through pinned host memory (runViaHost).
func (stg *stager) preparePeerCopy(st *opState, op *dag.Op) error {
	if !stg.b.multi.noPeer {
		st.act = actCopyPeer
		return nil
	}
	st.act = actCopyViaHost
	if _, ok := stg.stages[op.ID]; ok {
		return nil
	}
	src, dst := op.Access[0].View, op.Access[1].View
	n := src.Size
	sg := &stage{chunk: max(min(n, stageChunk), 1)}
	sg.size = sg.chunk * min(stageSlots, (n+sg.chunk-1)/sg.chunk)
	if stg.stages == nil {
		stg.stages = map[int]*stage{}
	}
	on, err := stg.hold.device(op.Device)
	if err != nil {
		return err
	}
	if sg.p, err = stg.drv.hostAlloc(on.ctx, max(sg.size, 1)); err != nil {
		return fmt.Errorf("staging buffer of %s for a copy through host memory: %w", dag.FormatBytes(sg.size), err)
	}
	sg.ctx = on.ctx
	stg.hold.track(&stg.hold.live.PinnedAllocs, 1)
	stg.stages[op.ID] = sg
	if n <= sg.chunk {
		return nil // one chunk: down and up on the op's stream
	}
	sg.ends = [2]*sessDevice{stg.hold.bufs[src.Buf.ID].dev, stg.hold.bufs[dst.Buf.ID].dev}
	event := func(d *sessDevice) (C.CUevent, error) {
		e, err := stg.drv.events.create(d.ctx, false)
		if err != nil {
			return nil, err
		}
		stg.hold.track(&stg.hold.live.Events, 1)
		sg.owned = append(sg.owned, devEvent{dev: d, ev: e})
		return e, nil
	}
	for i, d := range sg.ends {
		if sg.helpers[i], err = stg.stagingStream(d); err != nil {
			return err
		}
		if sg.start[i], err = event(d); err != nil {
			return err
		}
		if sg.done[i], err = event(d); err != nil {
			return err
		}
	}
	for j := range stageSlots {
		if sg.full[j], err = event(sg.ends[0]); err != nil {
			return err
		}
		if sg.empty[j], err = event(sg.ends[1]); err != nil {
			return err
		}
	}
	return nil
}

// stagingStream is the session's staging stream on device d, made at its
// first use.
func (stg *stager) stagingStream(d *sessDevice) (*stagingStream, error) {
	for _, u := range stg.staging {
		if u.dev == d {
			return u, nil
		}
	}
	h, err := stg.drv.streams.create(d.ctx, StreamPriority(dag.Normal, d.least, d.greatest))
	if err != nil {
		return nil, fmt.Errorf("staging stream on device %d: %w", d.ordinal, err)
	}
	stg.hold.track(&stg.hold.live.Streams, 1)
	u := &stagingStream{dev: d, h: h}
	stg.staging = append(stg.staging, u)
	return u, nil
}

// runViaHost enqueues a copy between devices through the op's staging
// buffer. A copy of one chunk goes down and up on the op's stream; a longer
// one is pipelined with the helper stream of the other end (dr_staged_copy)
// where the op's stream is on the source or the destination, and goes
// chunk by chunk on the op's stream otherwise.
func (stg *stager) runViaHost(s *stream, st *opState) error {
	op := st.op
	src, dst := op.Access[0].View, op.Access[1].View
	sg, ok := stg.stages[op.ID]
	if !ok {
		return errors.New("no staging buffer for the copy through host memory")
	}
	api, c, h := stg.drv.api, s.dev.ctx, s.h
	n := src.Size
	if i := slices.Index(sg.ends[:], s.dev); i >= 0 && sg.ends[0] != nil {
		hs := sg.helpers[1-i]
		down := C.int(1 - i) // the op's stream on the source copies down
		return stg.drv.check("cuMemcpyDtoHAsync_v2/cuMemcpyHtoDAsync_v2 (staged)", C.dr_staged_copy(api, c, h, hs.dev.ctx, hs.h, down,
			stg.hold.ptr(dst), stg.hold.ptr(src), C.size_t(n), sg.p, C.size_t(sg.chunk), stageSlots, sg.start[i], &sg.full[0], &sg.empty[0], sg.done[1-i]))
	}
	for off := int64(0); off < n; off += sg.chunk {
		k := C.size_t(min(sg.chunk, n-off))
		if err := stg.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, sg.p, stg.hold.ptr(src)+C.CUdeviceptr(off), k, h)); err != nil {
			return err
		}
		if err := stg.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, stg.hold.ptr(dst)+C.CUdeviceptr(off), sg.p, k, h)); err != nil {
			return err
		}
	}
	return nil
}

// viaHostCopies is how many copies (activity records) runViaHost makes of
// st.
func (stg *stager) viaHostCopies(st *opState) int {
	sg, ok := stg.stages[st.op.ID]
	if !ok {
		return 0
	}
	n := st.op.Access[0].Size
	return int(2 * ((n + sg.chunk - 1) / sg.chunk))
}

// freeStages releases the staging buffers, events and streams; Close
// calls it once the session's streams are done.
func (stg *stager) freeStages(keep func(error)) {
	for id, sg := range stg.stages {
		keep(stg.drv.hostFree(sg.ctx, sg.p))
		stg.hold.track(&stg.hold.live.PinnedAllocs, -1)
		for _, e := range sg.owned {
			keep(stg.drv.events.destroy(e.dev.ctx, e.ev))
			stg.hold.track(&stg.hold.live.Events, -1)
		}
		delete(stg.stages, id)
	}
	for _, u := range stg.staging {
		keep(stg.drv.streams.sync(u.dev.ctx, u.h))
		keep(stg.drv.streams.destroy(u.dev.ctx, u.h))
		stg.hold.track(&stg.hold.live.Streams, -1)
	}
	stg.staging = nil
}
