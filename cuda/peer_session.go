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
)

// Peer access and the backend's side of collectives: which devices reach
// each other's memory, and the NCCL library, loaded at the first Join.

// multiGPU is the backend's multi-device state: the peer access it enabled
// and NCCL. Its fields are guarded by Backend.mu, except the NCCL ones,
// which ncclOnce guards.
type multiGPU struct {
	noPeer  bool
	libnccl string
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
	t := Topology{access: map[[2]int]bool{}}
	for o := range b.devs {
		t.Devices = append(t.Devices, o)
	}
	slices.Sort(t.Devices)
	for k, v := range b.multi.peer {
		t.access[k] = v
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
		if err := b.drv.poolPeerAccess(g.ctx, g.pool, i, devs, m); err != nil {
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

// stage is the pinned host buffer a copy between devices goes through
// under NoPeer.
type stage struct {
	p    unsafe.Pointer
	size int64
	ctx  C.CUcontext
}

// preparePeerCopy prepares a copy between two devices: cuMemcpyPeerAsync
// (direct where peer access is on, staged by the driver otherwise), or,
// under NoPeer, two copies through a pinned buffer of the session's.
func (se *Session) preparePeerCopy(st *opState, op *dag.Op) error {
	if !se.b.multi.noPeer {
		st.act = actCopyPeer
		return nil
	}
	n := op.Access[0].Size
	if old, ok := se.stages[op.ID]; ok && old.size >= n {
		st.act = actCopyViaHost
		return nil
	}
	d, err := se.device(op.Device)
	if err != nil {
		return err
	}
	p, err := se.drv.hostAlloc(d.ctx, max(n, 1))
	if err != nil {
		return fmt.Errorf("staging buffer of %s for a copy through host memory: %w", dag.FormatBytes(n), err)
	}
	se.track(&se.live.PinnedAllocs, 1)
	if se.stages == nil {
		se.stages = map[int]stage{}
	}
	if old, ok := se.stages[op.ID]; ok {
		se.drv.hostFree(old.ctx, old.p)
		se.track(&se.live.PinnedAllocs, -1)
	}
	se.stages[op.ID] = stage{p: p, size: n, ctx: d.ctx}
	st.act = actCopyViaHost
	return nil
}

// runViaHost enqueues a copy between devices through the op's staging
// buffer: device to host, then host to device, in stream order.
func (se *Session) runViaHost(s *stream, st *opState) error {
	op := st.op
	src, dst := op.Access[0].View, op.Access[1].View
	sg, ok := se.stages[op.ID]
	if !ok || sg.size < src.Size {
		return errors.New("no staging buffer for the copy through host memory")
	}
	api, c, h, n := se.drv.api, s.dev.ctx, s.h, C.size_t(src.Size)
	if err := se.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, sg.p, se.ptr(src), n, h)); err != nil {
		return err
	}
	return se.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, se.ptr(dst), sg.p, n, h))
}

// freeStages releases the staging buffers; Close calls it once the
// streams are done.
func (se *Session) freeStages(keep func(error)) {
	for id, sg := range se.stages {
		keep(se.drv.hostFree(sg.ctx, sg.p))
		se.track(&se.live.PinnedAllocs, -1)
		delete(se.stages, id)
	}
}
