package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Shared memory: a session opened over another's buffers and arenas
// (device.MemorySharer), for sessions that never run at once (the
// executor's Shapes: the shapes of one program). The session's ops take
// the lender's device and host addresses when they are prepared, and its
// temporaries' places in the lender's arenas, as UseArenas places them in
// arenas of its own; it allocates, fills and frees none of that memory.
// Its GEMMs' cuBLASLt workspaces come from the lender too: the k-th GEMM
// of every session over one lender shares a workspace (never two GEMMs of
// one session, which may run side by side), which the lender frees.

var _ device.MemorySharer = (*Backend)(nil)

// lender is what a session opened by OpenShared takes from another.
type lender struct {
	owner *holdings
	from  []*dag.Buffer // by the session's buffer ID: the owner's buffer it uses, or nil
}

// OpenShared opens a session for g whose persistent buffers that sh maps
// use the first bytes of owner's buffers and whose device temporaries
// that sh places are in owner's arenas (device.MemorySharer); host
// temporaries, and buffers sh leaves out, are the session's own. owner
// must stay open while the session is: Close frees what owner lent only
// when owner closes.
func (b *Backend) OpenShared(ctx context.Context, g *dag.Graph, owner device.Session, sh device.Shared) (device.Session, error) {
	if b == nil || b.drv == nil {
		return nil, errors.New("cuda: OpenShared: the backend was not made by cuda.New")
	}
	if g == nil {
		return nil, errors.New("cuda: OpenShared: no graph")
	}
	o, ok := owner.(*Session)
	if !ok || o.b != b {
		return nil, fmt.Errorf("cuda: OpenShared: the owner (%T) is not a session of this backend", owner)
	}
	if o.hold.closed {
		return nil, fmt.Errorf("cuda: OpenShared: the owner is %w", device.ErrClosed)
	}
	if len(sh.Buffers) > len(g.Buffers) {
		return nil, fmt.Errorf("cuda: OpenShared: %d shared buffers for a graph of %d", len(sh.Buffers), len(g.Buffers))
	}
	se, err := b.openSession(ctx, g, &lender{owner: &o.hold, from: sh.Buffers})
	if err != nil {
		return nil, err
	}
	arenas := map[int]*devArena{}
	for i := range o.hold.arenas {
		a := &o.hold.arenas[i]
		arenas[a.dev.ordinal] = a
	}
	if err := placeTemporaries(&se.hold, se.sub.ops, "OpenShared", arenas, sh.Offsets); err != nil {
		return nil, errors.Join(err, se.Close())
	}
	se.hold.lentArenas = append([]devArena(nil), o.hold.arenas...)
	return se, nil
}

// borrow takes the lender's memory for the buffers it lends, before
// allocBuffers allocates the others: each lent buffer's address is the
// owner's buffer's, after checking the two are alike.
func (hd *holdings) borrow() error {
	l := hd.lender
	if l == nil {
		return nil
	}
	og := l.owner.g
	for i, from := range l.from {
		bs := &hd.bufs[i]
		if from == nil || bs.b.Temporary {
			continue
		}
		buf := bs.b
		switch {
		case from.ID < 0 || from.ID >= len(og.Buffers) || og.Buffers[from.ID] != from || from.Temporary:
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("is to use %s, which is not a persistent buffer of the owner's graph", from.Name), Hint: "give OpenShared the owner's own buffers"}
		case from.Placement != buf.Placement || buf.Placement == dag.Device && from.Device != buf.Device:
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("is in %s, the owner's %s in %s", placeName(buf), from.Name, placeName(from)), Hint: "share buffers of one memory"}
		case from.Size < buf.Size:
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("needs %d bytes, the owner's %s has %d", buf.Size, from.Name, from.Size), Hint: "allocate the owner's buffers at the largest size"}
		}
		ob := &l.owner.bufs[from.ID]
		if ob.dptr == 0 && ob.host == nil {
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("is to use the owner's %s, which holds no memory", from.Name)}
		}
		bs.dptr, bs.host, bs.lent = ob.dptr, ob.host, true
	}
	return nil
}

// workspaces are the cuBLASLt workspaces a lender lends the sessions over
// it: slot k holds the workspaces of their k-th GEMMs, any of which one
// session's k-th GEMM may take.
type workspaces struct {
	mu    sync.Mutex // sessions over one lender may open side by side
	slots [][]lentWorkspace
}

type lentWorkspace struct {
	dev  *gpu
	ptr  C.CUdeviceptr
	size int64
}

// lendWorkspace returns a workspace of at least n bytes on d for the k-th
// GEMM of a session over hd, allocating one if slot k has none as large.
func (hd *holdings) lendWorkspace(k int, d *gpu, n int64) (C.CUdeviceptr, error) {
	w := &hd.lentWS
	w.mu.Lock()
	defer w.mu.Unlock()
	if hd.closed {
		return 0, fmt.Errorf("the lender is %w", device.ErrClosed)
	}
	for len(w.slots) <= k {
		w.slots = append(w.slots, nil)
	}
	for _, a := range w.slots[k] {
		if a.dev == d && a.size >= n {
			return a.ptr, nil
		}
	}
	p, err := hd.drv.memAlloc(d.ctx, n)
	if err != nil {
		return 0, err
	}
	hd.track(&hd.live.DeviceAllocs, 1)
	w.slots[k] = append(w.slots[k], lentWorkspace{dev: d, ptr: p, size: n})
	return p, nil
}

// freeWorkspaces frees the workspaces hd lent (Close, once the sessions
// over it are closed).
func (hd *holdings) freeWorkspaces(keep func(error)) {
	w := &hd.lentWS
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, slot := range w.slots {
		for _, a := range slot {
			keep(hd.drv.memFree(a.dev.ctx, a.ptr))
			hd.track(&hd.live.DeviceAllocs, -1)
		}
	}
	w.slots = nil
}
