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
	"runtime"
	"sync"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Memory: a session's buffers, allocated at Open and released at Close.

// holdings is what a session holds on its devices: the devices as it uses
// them, its buffers, and the count of everything it holds (Live).
// Persistent device buffers come from cuMemAlloc, temporaries from the
// device's pool in stream order (cuMemAllocAsync) or from arenas; pinned
// host buffers of 2 MiB and more from huge pages registered with the
// driver, smaller ones from cuMemHostAlloc; pageable ones from the C heap,
// never Go memory. Copies and fills that touch only host memory run in
// stream order through cuLaunchHostFunc.
type holdings struct {
	b      *Backend
	drv    *driver
	g      *dag.Graph
	closed bool // Close has released what it held
	devs   map[int]*sessDevice
	bufs   []buffer   // by Buffer.ID
	arenas []devArena // the device temporaries' arenas, if the plan placed them (arena.go)
	// lender and lentArenas are what OpenShared takes from another
	// session, which frees them (shared.go).
	lender     *lender
	lentArenas []devArena
	lentWS     workspaces // the cuBLASLt workspaces this session lends (shared.go)

	liveMu sync.Mutex // Live may be called from another goroutine (Backend.Live)
	live   Resources

	// initPending lists the devices whose legacy streams make initial
	// contents until allocBuffers waits for them (initdev.go);
	// deviceInits counts the buffers whose contents a device made.
	initPending []*sessDevice
	deviceInits int
}

type buffer struct {
	b    *dag.Buffer
	dev  *sessDevice    // device buffers: their device
	dptr C.CUdeviceptr  // device buffers; 0 while a temporary is not allocated
	host unsafe.Pointer // host buffers
	// filled: host holds the initial contents already (made ahead).
	filled bool
	// inArena says dptr is a place in an arena (arena.go): the temporary
	// is neither allocated nor freed on its own.
	inArena bool
	// lent says dptr or host is another session's buffer (shared.go):
	// neither allocated, filled nor freed here.
	lent bool
}

// allocBuffers allocates every persistent buffer with its initial contents
// and every temporary host buffer (host memory is not stream-ordered: a
// temporary one lives as long as the session is open).
func (hd *holdings) allocBuffers(ctx context.Context) (err error) {
	// Device contents are made on the legacy streams: wait for them once,
	// on error too, so that no kernel writes a buffer Close frees.
	defer func() { err = errors.Join(err, hd.waitInits()) }()
	hd.bufs = make([]buffer, len(hd.g.Buffers))
	for i, buf := range hd.g.Buffers {
		bs := &hd.bufs[i]
		bs.b = buf
		if buf.ID != i {
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("has ID %d at index %d", buf.ID, i), Hint: "pass a graph made by dag.Builder.Build"}
		}
		ordinal := buf.Device
		if buf.Placement != dag.Device {
			ordinal = hd.anyDevice()
		}
		d, err := hd.device(ordinal)
		if err != nil {
			return err
		}
		bs.dev = d
	}
	if err := hd.borrow(); err != nil { // shared.go
		return err
	}
	failed := func(bs *buffer, err error) error {
		buf := bs.b
		return &dag.OpError{Op: "open", Err: fmt.Errorf("buffer %q (%d bytes, %s): %w", buf.Name, buf.Size, placeName(buf), err)}
	}
	// Host buffers made ahead (PrepareHost, hostprep.go) are taken below;
	// whatever is left is freed, on error too.
	prep := hd.b.takePrepared(hd.g)
	if prep != nil {
		prep.wg.Wait()
		defer prep.free()
	}
	if bs, err := hd.pinAll(prep); err != nil {
		return failed(bs, err)
	}
	for i := range hd.bufs {
		if err := ctx.Err(); err != nil {
			return err
		}
		bs := &hd.bufs[i]
		if bs.b.Placement == dag.Device && bs.b.Temporary || bs.lent {
			continue
		}
		if err := hd.allocBuffer(bs, prep); err != nil {
			return failed(bs, err)
		}
	}
	return nil
}

// pinAll allocates the pinned buffers side by side, ahead of allocBuffer:
// pinning is the kernel's work page by page, 7-11 ms for 16 MiB from
// cuMemHostAlloc on the H100's host. It returns the first buffer that
// failed, with its error; those allocated are held (freeBuffers frees
// them).
func (hd *holdings) pinAll(prep *hostPrep) (*buffer, error) {
	var pinned []*buffer
	var ahead []unsafe.Pointer // made ahead, by pinned's index; nil where not
	for i := range hd.bufs {
		if bs := &hd.bufs[i]; bs.b.Placement == dag.Pinned && !bs.lent {
			pinned = append(pinned, bs)
			ahead = append(ahead, prep.take(bs.b))
		}
	}
	if len(pinned) < 2 && (len(pinned) == 0 || ahead[0] == nil) {
		return nil, nil // allocBuffer pins it
	}
	errs := make([]error, len(pinned))
	var wg sync.WaitGroup
	for i, bs := range pinned {
		wg.Go(func() { errs[i] = hd.pin(bs, ahead[i]) })
	}
	wg.Wait()
	var first *buffer
	var firstErr error
	for i, bs := range pinned {
		if bs.host != nil {
			hd.track(&hd.live.PinnedAllocs, 1)
		}
		if errs[i] != nil && first == nil {
			first, firstErr = bs, errs[i]
		}
	}
	return first, firstErr
}

// pin makes pinned buffer bs's memory: ahead, the memory PrepareHost
// made and filled, registered; else (or where registering fails) a fresh
// allocation, filled by allocBuffer.
func (hd *holdings) pin(bs *buffer, ahead unsafe.Pointer) error {
	drv := hd.drv
	if ahead != nil {
		if drv.hostRegister(bs.dev.ctx, ahead, bs.b.Size) == nil {
			bs.host, bs.filled = ahead, true
			return nil
		}
		hostRelease(ahead, bs.b.Size)
	}
	p, err := drv.hostAlloc(bs.dev.ctx, bs.b.Size)
	if err == nil {
		bs.host = p
	}
	return err
}

// anyDevice is the device host memory is pinned through: the lowest one
// the graph uses, else 0. Pinned memory is portable: every context sees it.
func (hd *holdings) anyDevice() int {
	best := -1
	for _, op := range hd.g.Ops {
		if best < 0 || op.Device < best {
			best = op.Device
		}
	}
	for _, buf := range hd.g.Buffers {
		if buf.Placement == dag.Device && (best < 0 || buf.Device < best) {
			best = buf.Device
		}
	}
	return max(best, 0)
}

func (hd *holdings) allocBuffer(bs *buffer, prep *hostPrep) error {
	buf := bs.b
	switch buf.Placement {
	case dag.Device:
		p, err := hd.drv.memAlloc(bs.dev.ctx, buf.Size)
		if err != nil {
			return err
		}
		bs.dptr = p
		hd.track(&hd.live.DeviceAllocs, 1)
		switch buf.Init.Kind {
		case dag.InitNone, dag.InitZeros:
			return hd.zeroOnDevice(bs)
		case dag.InitRandom, dag.InitValue:
			if done, err := hd.initOnDevice(bs); done || err != nil {
				return err
			}
		}
		return hd.drv.htod(bs.dev.ctx, p, buf.InitialBytes())
	case dag.Pinned:
		if bs.host == nil { // else pinAll pinned it
			if err := hd.pin(bs, prep.take(buf)); err != nil {
				return err
			}
			hd.track(&hd.live.PinnedAllocs, 1)
		}
	default:
		if p := prep.take(buf); p != nil {
			bs.host, bs.filled = p, true
		} else if bs.host = C.malloc(C.size_t(buf.Size)); bs.host == nil {
			return errors.New("out of host memory")
		}
		hd.track(&hd.live.HostAllocs, 1)
	}
	if !bs.filled {
		// Made in place: no staging copy of what may be many megabytes.
		buf.WriteInitial(unsafe.Slice((*byte)(bs.host), buf.Size))
	}
	return nil
}

func placeName(b *dag.Buffer) string {
	if b.Placement == dag.Device {
		return fmt.Sprintf("device %d", b.Device)
	}
	return b.Placement.String() + " host"
}

// freeBuffers frees the session's buffers (Close).
func (hd *holdings) freeBuffers(keep func(error)) {
	for i := range hd.bufs {
		bs := &hd.bufs[i]
		switch {
		case bs.inArena || bs.lent:
			bs.dptr, bs.host = 0, nil // freed with its arena, or by the session that lent it
		case bs.dptr != 0:
			keep(hd.drv.memFree(bs.dev.ctx, bs.dptr))
			if bs.b.Temporary {
				hd.track(&hd.live.PoolAllocs, -1)
			} else {
				hd.track(&hd.live.DeviceAllocs, -1)
			}
		case bs.host != nil && bs.b.Placement == dag.Pinned:
			keep(hd.drv.hostFree(bs.dev.ctx, bs.host))
			hd.track(&hd.live.PinnedAllocs, -1)
		case bs.host != nil:
			C.free(bs.host)
			hd.track(&hd.live.HostAllocs, -1)
		}
	}
}

// Read returns the contents of a persistent buffer; call it after Sync.
func (se *Session) Read(buf *dag.Buffer) ([]byte, error) {
	if se.hold.closed || buf == nil || buf.ID < 0 || buf.ID >= len(se.hold.bufs) || se.hold.bufs[buf.ID].b != buf {
		return nil, fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return nil, fmt.Errorf("cuda: buffer %q is temporary: it has no contents after a run (make it persistent to read it)", buf.Name)
	}
	bs := &se.hold.bufs[buf.ID]
	out := make([]byte, buf.Size)
	if buf.Placement == dag.Device {
		if err := se.drv.dtoh(bs.dev.ctx, out, bs.dptr); err != nil {
			return nil, fmt.Errorf("reading buffer %q: %w", buf.Name, err)
		}
		return out, nil
	}
	copyParallel(out, unsafe.Slice((*byte)(bs.host), buf.Size))
	return out, nil
}

// copyParallel copies src into dst, which is fresh memory, in parts side
// by side when it is large: most of a 16 MiB copy into a new slice is the
// kernel faulting its pages in one at a time (15-20 ms of a dagrun run's
// cold start on the H100's host), which parts spread over the cores.
func copyParallel(dst, src []byte) {
	const part = 2 << 20
	n := min(len(src)/part, runtime.GOMAXPROCS(0), 8)
	if n < 2 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	size := (len(src) + n - 1) / n
	for lo := 0; lo < len(src); lo += size {
		hi := min(lo+size, len(src))
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	wg.Wait()
}

// Write replaces the contents of persistent buffer buf with data, which
// must be buf's size: a new input between runs or graph replays. Call it
// when the work that uses buf is done (after Sync).
func (se *Session) Write(buf *dag.Buffer, data []byte) error {
	if se.hold.closed || buf == nil || buf.ID < 0 || buf.ID >= len(se.hold.bufs) || se.hold.bufs[buf.ID].b != buf {
		return fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return fmt.Errorf("cuda: buffer %q is temporary: it exists only inside a run (write a persistent buffer and copy it in)", buf.Name)
	}
	if int64(len(data)) != buf.Size {
		return fmt.Errorf("cuda: writing %d bytes into buffer %q of %d bytes: write the whole buffer", len(data), buf.Name, buf.Size)
	}
	bs := &se.hold.bufs[buf.ID]
	if buf.Placement == dag.Device {
		if err := se.drv.htod(bs.dev.ctx, bs.dptr, data); err != nil {
			return fmt.Errorf("writing buffer %q: %w", buf.Name, err)
		}
		return nil
	}
	copy(unsafe.Slice((*byte)(bs.host), buf.Size), data)
	return nil
}
