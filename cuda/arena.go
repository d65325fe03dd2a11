package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

var (
	_ device.ArenaUser   = (*Session)(nil)
	_ device.HighWaterer = (*Session)(nil)
)

// Arenas: a session's device temporaries placed by the plan (planner's
// Memory) in one allocation per device, made here and freed at Close.
// Allocs and frees of those temporaries then enqueue nothing, so a
// captured graph holds no memory nodes for them. Two temporaries share
// bytes only where the plan orders every use of one before every use of
// the other (verify.Verify checks it), which stream order and events
// keep on the device as they do on the CPU backend.

// devArena is one device's arena.
type devArena struct {
	dev  *sessDevice
	base C.CUdeviceptr
	size int64
}

// UseArenas allocates one arena of arenas[m] bytes on each device m and
// places every device temporary i at offsets[i] in its device's arena (-1:
// no place; the temporary stays in the pool). Host memories (m < 0) keep
// their temporaries in buffers of their own, as sessions do without
// arenas. Call it after Open, before the first run (executor's
// device.ArenaUser). On error nothing is changed.
func (se *Session) UseArenas(arenas map[int]int64, offsets []int64) error {
	if err := unopened(se.drv); err != nil {
		return err
	}
	se = joined(se)
	hd := &se.hold
	switch {
	case se.hold.closed:
		return fmt.Errorf("cuda: UseArenas: the session is %w", device.ErrClosed)
	case hd.arenas != nil || hd.lentArenas != nil:
		return errors.New("cuda: UseArenas: the session's temporaries are in arenas already")
	case len(offsets) != len(hd.bufs):
		return fmt.Errorf("cuda: UseArenas: %d offsets for %d buffers", len(offsets), len(hd.bufs))
	}
	for i := range hd.bufs {
		if bs := &hd.bufs[i]; bs.b.Temporary && bs.b.Placement == dag.Device && bs.dptr != 0 {
			return fmt.Errorf("cuda: UseArenas: temporary %s is allocated already: call it before the first run", bs.b.Name)
		}
	}
	made := map[int]*devArena{}
	release := func() {
		for _, a := range made {
			se.drv.memFree(a.dev.ctx, a.base)
			hd.track(&hd.live.DeviceAllocs, -1)
		}
	}
	for m, n := range arenas {
		if m < 0 || n <= 0 {
			continue
		}
		d, err := hd.device(m)
		if err != nil {
			release()
			return fmt.Errorf("cuda: UseArenas: device %d: %w", m, err)
		}
		p, err := se.drv.memAlloc(d.ctx, n)
		if err != nil {
			release()
			return fmt.Errorf("cuda: UseArenas: the arena of %s on device %d: %w", dag.FormatBytes(n), m, err)
		}
		hd.track(&hd.live.DeviceAllocs, 1)
		made[m] = &devArena{dev: d, base: p, size: n}
	}
	if err := placeTemporaries(&se.hold, se.sub.ops, "UseArenas", made, offsets); err != nil {
		release()
		return err
	}
	hd.arenas = make([]devArena, 0, len(made))
	for _, a := range made {
		hd.arenas = append(hd.arenas, *a)
	}
	return nil
}

// placeTemporaries places every device temporary i at offsets[i] of its
// device's arena in arenas (-1, or past offsets: left in the pool), and
// makes its Alloc and Free ops (of ops) do nothing. On error nothing is
// changed.
func placeTemporaries(hd *holdings, ops []opState, verb string, arenas map[int]*devArena, offsets []int64) error {
	placed := make([]C.CUdeviceptr, len(hd.bufs))
	for i := range hd.bufs {
		bs := &hd.bufs[i]
		if !bs.b.Temporary || bs.b.Placement != dag.Device || i >= len(offsets) || offsets[i] < 0 {
			continue
		}
		a, off := arenas[bs.b.Device], offsets[i]
		if a == nil || off > a.size || bs.b.Size > a.size-off {
			return fmt.Errorf("cuda: %s: temporary %s (%d bytes) at offset %d does not fit the arena of device %d", verb, bs.b.Name, bs.b.Size, off, bs.b.Device)
		}
		placed[i] = a.base + C.CUdeviceptr(off)
	}
	for i, p := range placed {
		if p != 0 {
			hd.bufs[i].dptr, hd.bufs[i].inArena = p, true
		}
	}
	for i := range ops {
		st := &ops[i]
		if st.op != nil && st.op.Kind.Info().Lifetime != dag.NoLifetime && hd.bufs[st.op.Buffer().ID].inArena {
			st.act = actNone // the arena holds the temporary for the session's life
		}
	}
	return nil
}

// freeArenas frees the arenas (Close, after the streams are done).
func (hd *holdings) freeArenas(keep func(error)) {
	for _, a := range hd.arenas {
		keep(hd.drv.memFree(a.dev.ctx, a.base))
		hd.track(&hd.live.DeviceAllocs, -1)
	}
	hd.arenas = nil
}

// MemoryHighWater reports, by device ordinal, the most device memory the
// session's temporaries held at once. Where they live in arenas, it is
// each arena's size: the arena holds them for the session's life. Where
// they come from the pool, it is the most bytes of the session's
// temporaries the device's pool held at once in any eager run since Open,
// as the pool counts them (its high-water mark, from each allocation to
// its free; poolwatch.go says what that leaves out). Devices no eager run
// allocated on are absent, and without any it is nil: replays' temporaries
// are graph memory, not the pool's, and a driver without
// cuMemPoolGetAttribute measures nothing.
func (se *Session) MemoryHighWater() map[int]int64 {
	se = joined(se)
	arenas := se.hold.arenas
	if arenas == nil {
		arenas = se.hold.lentArenas // shared.go: the owner's
	}
	if arenas == nil {
		return se.hold.poolHighWater() // poolwatch.go
	}
	out := map[int]int64{}
	for _, a := range arenas {
		out[a.dev.ordinal] = a.size
	}
	return out
}
