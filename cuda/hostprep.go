package cuda

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Host buffers made ahead of their session: between admission and Open,
// the executor asks for the devices' free memory, which makes the CUDA
// context (90-100 ms on the H100). PrepareHost starts making the graph's
// big host buffers then, on goroutines: pinned ones mapped from huge
// pages (hostReserve), pageable ones from the C heap, each filled with its
// initial contents. Open takes them, pins the pinned ones (registering
// memory already there costs less than faulting it in) and makes the rest
// as before.

var _ device.HostPreparer = (*Backend)(nil)

// hostPrepMin is the least a buffer must hold to be made ahead: below it
// a goroutine costs more than the work it would hide.
const hostPrepMin = 1 << 20

// hostPrep is one graph's host buffers made ahead.
type hostPrep struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	mem map[*dag.Buffer]unsafe.Pointer // written once wg is done
}

// PrepareHost starts making g's big host buffers (device.HostPreparer).
// It returns at once; release drops what was made if no Open takes it.
func (b *Backend) PrepareHost(g *dag.Graph) (release func()) {
	nothing := func() {}
	if b == nil || b.drv == nil || g == nil {
		return nothing
	}
	hp := &hostPrep{mem: map[*dag.Buffer]unsafe.Pointer{}}
	huge := b.drv.hugeUsable()
	for _, buf := range g.Buffers {
		if buf.Size < hostPrepMin || buf.Temporary {
			continue
		}
		switch {
		case buf.Placement == dag.Pinned && huge && buf.Size >= hugePinMin:
			hp.wg.Go(func() {
				p := hostReserve(buf.Size)
				if p == nil {
					return // Open pins it the usual way
				}
				if k := buf.Init.Kind; k != dag.InitNone && k != dag.InitZeros {
					buf.WriteInitial(unsafe.Slice((*byte)(p), buf.Size))
				} else {
					hostFault(p, buf.Size) // zero already: its pages made now, not when Open pins them
				}
				hp.put(buf, p)
			})
		case buf.Placement == dag.Pageable:
			hp.wg.Go(func() {
				p := C.malloc(C.size_t(buf.Size))
				if p == nil {
					return
				}
				buf.WriteInitial(unsafe.Slice((*byte)(p), buf.Size))
				hp.put(buf, p)
			})
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.prepared[g] != nil {
		go hp.free() // another is made already, or no Open will come
		return nothing
	}
	if b.prepared == nil {
		b.prepared = map[*dag.Graph]*hostPrep{}
	}
	b.prepared[g] = hp
	return func() {
		if hp := b.takePrepared(g); hp != nil {
			hp.free()
		}
	}
}

func (hp *hostPrep) put(buf *dag.Buffer, p unsafe.Pointer) {
	hp.mu.Lock()
	hp.mem[buf] = p
	hp.mu.Unlock()
}

// takePrepared removes g's buffers made ahead, if any, from b; the caller
// waits for them (wg) and frees what it does not use.
func (b *Backend) takePrepared(g *dag.Graph) *hostPrep {
	b.mu.Lock()
	defer b.mu.Unlock()
	hp := b.prepared[g]
	delete(b.prepared, g)
	return hp
}

// take hands buf's memory made ahead to its session, nil if none was.
func (hp *hostPrep) take(buf *dag.Buffer) unsafe.Pointer {
	if hp == nil {
		return nil
	}
	p := hp.mem[buf]
	delete(hp.mem, buf)
	return p
}

// free waits for the work and frees what was not taken.
func (hp *hostPrep) free() {
	hp.wg.Wait()
	for buf, p := range hp.mem {
		if buf.Placement == dag.Pinned {
			hostRelease(p, buf.Size)
		} else {
			C.free(p)
		}
	}
	clear(hp.mem)
}
