package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// rawLoop drives the driver directly, with no plan and no backend logic in
// between: the floor that the benchmarks compare the Backend with. It
// borrows a Backend's context and builtin kernels on device 0 (loading
// them if no session has) and makes its own streams.
type rawLoop struct {
	b       *Backend
	d       *gpu
	streams *C.CUstream // C array, so that C loops can walk it
	n       int
	launch  *C.dr_launch
	event   C.CUevent
	timing  []C.CUevent // timing events of timedC, made at its first call
	ms      []float32
}

// newRawLoop makes n streams of priority p on device 0 and a launch record
// of builtin kernel k (empty, or spin with us microseconds) on a grid of
// one block of 32 threads.
func newRawLoop(b *Backend, n int, p dag.Priority, k *dag.Kernel, us float64) (*rawLoop, error) {
	d, err := b.device(0)
	if err != nil {
		return nil, fmt.Errorf("raw loop: %w", err)
	}
	f, err := b.kernel(d, k)
	if err != nil {
		return nil, fmt.Errorf("raw loop: kernel %s: %w", k.Name, err)
	}
	r := &rawLoop{b: b, d: d, n: n}
	r.streams = (*C.CUstream)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.CUstream(nil)))))
	nslots := 0
	if k == dag.Spin {
		nslots = 1
	}
	r.launch = C.dr_launch_new(C.int(nslots))
	if r.streams == nil || r.launch == nil {
		r.close()
		return nil, errors.New("raw loop: out of host memory")
	}
	l := r.launch
	l.f = f
	l.gx, l.gy, l.gz, l.bx, l.by, l.bz = 1, 1, 1, 32, 1, 1
	if nslots == 1 {
		unsafe.Slice(l.slots, 1)[0] = C.uint64_t(math.Float64bits(us))
	}
	ss := unsafe.Slice(r.streams, n)
	for i := range ss {
		s, err := b.drv.streams.create(d.ctx, StreamPriority(p, d.least, d.greatest))
		if err != nil {
			r.close()
			return nil, err
		}
		ss[i] = s
	}
	e, err := b.drv.events.create(d.ctx, false)
	if err != nil {
		r.close()
		return nil, err
	}
	r.event = e
	return r, nil
}

// newRawKernel makes a raw loop of one stream of priority p whose launch
// record is builtin kernel k on a 1-D grid of grid blocks of block threads
// with the given argument slots (each buffer a pointer and an element
// count, as prepareLaunch lays them out): the floor of a chain of ops of a
// builtin with buffers (BenchmarkPDL).
func newRawKernel(b *Backend, p dag.Priority, k *dag.Kernel, grid, block int, slots []uint64) (*rawLoop, error) {
	r, err := newRawLoop(b, 1, p, dag.Empty, 0)
	if err != nil {
		return nil, err
	}
	f, err := b.kernel(r.d, k)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("raw loop: kernel %s: %w", k.Name, err)
	}
	l := C.dr_launch_new(C.int(len(slots)))
	if l == nil {
		r.close()
		return nil, errors.New("raw loop: out of host memory")
	}
	C.free(unsafe.Pointer(r.launch))
	r.launch = l
	l.f = f
	l.gx, l.gy, l.gz, l.bx, l.by, l.bz = C.uint(grid), 1, 1, C.uint(block), 1, 1
	for i, v := range slots {
		unsafe.Slice(l.slots, len(slots))[i] = C.uint64_t(v)
	}
	return r, nil
}

// launchesC launches rounds x streams kernels breadth first from one C
// loop, then synchronises the context: raw.c's loop.
func (r *rawLoop) launchesC(rounds int) error {
	return r.b.drv.check("cuLaunchKernel", C.dr_raw_launches(r.b.drv.api, r.d.ctx, r.launch, r.streams, C.int(r.n), C.int(rounds), 1))
}

// launchesGo does what launchesC does with one cgo call per launch: the
// floor of any Go binding.
func (r *rawLoop) launchesGo(rounds int) error {
	ss := unsafe.Slice(r.streams, r.n)
	for range rounds {
		for _, s := range ss {
			if rc := C.dr_launch_kernel(r.b.drv.api, r.d.ctx, r.launch, s); rc != 0 {
				return r.b.drv.check("cuLaunchKernel", rc)
			}
		}
	}
	return r.b.drv.ctxSync(r.d.ctx)
}

// recordWaitC records an event on stream 0 and makes stream 1 wait for it,
// n times, from one C loop.
func (r *rawLoop) recordWaitC(n int) error {
	ss := unsafe.Slice(r.streams, r.n)
	if err := r.b.drv.check("cuEventRecord", C.dr_raw_record_wait(r.b.drv.api, r.d.ctx, r.event, ss[0], ss[1], C.int(n))); err != nil {
		return err
	}
	return r.b.drv.ctxSync(r.d.ctx)
}

// timedC is launchesC with per (1 or 2) timing events recorded with each
// launch and, if read, all their times read back, from one C loop: the
// floor of a traced eager run.
func (r *rawLoop) timedC(rounds, per int, read bool) error {
	n := 1 + rounds*r.n*per
	for len(r.timing) < n {
		e, err := r.b.drv.events.create(r.d.ctx, true)
		if err != nil {
			return err
		}
		r.timing = append(r.timing, e)
	}
	if len(r.ms) < n {
		r.ms = make([]float32, n)
	}
	readBack := C.int(0)
	if read {
		readBack = 1
	}
	return r.b.drv.check("cuEventElapsedTime", C.dr_raw_timed_launches(r.b.drv.api, r.d.ctx, r.launch, r.streams,
		C.int(r.n), C.int(rounds), &r.timing[0], C.int(per), (*C.float)(&r.ms[0]), readBack))
}

func (r *rawLoop) close() {
	for _, e := range r.timing {
		r.b.drv.events.destroy(r.d.ctx, e)
	}
	if r.event != nil {
		r.b.drv.events.destroy(r.d.ctx, r.event)
	}
	if r.streams != nil {
		for _, s := range unsafe.Slice(r.streams, r.n) {
			if s != nil {
				r.b.drv.streams.destroy(r.d.ctx, s)
			}
		}
		C.free(unsafe.Pointer(r.streams))
	}
	if r.launch != nil {
		C.free(unsafe.Pointer(r.launch))
	}
}

// memProbe holds device 0's primary context so that its free memory can be
// compared before and after a backend's life.
type memProbe struct {
	drv *driver
	dev C.CUdevice
	ctx C.CUcontext
}

func newMemProbe(drv *driver) (*memProbe, error) {
	info, err := drv.device(0)
	if err != nil {
		return nil, err
	}
	c, err := drv.retainPrimary(info.dev)
	if err != nil {
		return nil, err
	}
	return &memProbe{drv: drv, dev: info.dev, ctx: c}, nil
}

func (p *memProbe) free() (uint64, error) {
	f, _, err := p.drv.memInfo(p.ctx)
	return f, err
}

func (p *memProbe) close() error { return p.drv.releasePrimary(p.dev) }

// rawSession makes and releases, with no plan, what a session of a plan
// makes: its streams (of one priority), its events and its buffers, each
// zeroed, from one C call each way. It is the floor that executor.Open
// and Session.Close are compared with.
type rawSession struct {
	b       *Backend
	d       *gpu
	prio    int
	streams []C.CUstream // C memory, so that C can fill it
	events  []C.CUevent
	bufs    []unsafe.Pointer
	sizes   []C.size_t
	kinds   []C.int
	mem     unsafe.Pointer // the C block behind the slices
}

// newRawSession prepares a raw session of the shape of a graph: nstreams
// streams, nevents events and the persistent buffers of g (with device
// buffers on device 0).
func newRawSession(b *Backend, nstreams, nevents int, g *dag.Graph) (*rawSession, error) {
	d, err := b.device(0)
	if err != nil {
		return nil, fmt.Errorf("raw session: %w", err)
	}
	r := &rawSession{b: b, d: d, prio: StreamPriority(dag.Normal, d.least, d.greatest)}
	var sizes []C.size_t
	var kinds []C.int
	for _, buf := range g.Buffers {
		if buf.Temporary && buf.Placement == dag.Device {
			continue // allocated inside runs, from the pool
		}
		sizes = append(sizes, C.size_t(buf.Size))
		switch buf.Placement {
		case dag.Device:
			kinds = append(kinds, 0)
		case dag.Pinned:
			kinds = append(kinds, 1)
		default:
			kinds = append(kinds, 2)
		}
	}
	nb := len(sizes)
	ptr := unsafe.Sizeof(unsafe.Pointer(nil))
	total := uintptr(nstreams+nevents+nb)*ptr + uintptr(nb)*(unsafe.Sizeof(C.size_t(0))+unsafe.Sizeof(C.int(0)))
	r.mem = C.calloc(1, C.size_t(max(total, 1)))
	if r.mem == nil {
		return nil, errors.New("raw session: out of host memory")
	}
	at := r.mem
	r.streams = unsafe.Slice((*C.CUstream)(at), nstreams)
	at = unsafe.Add(at, uintptr(nstreams)*ptr)
	r.events = unsafe.Slice((*C.CUevent)(at), nevents)
	at = unsafe.Add(at, uintptr(nevents)*ptr)
	r.bufs = unsafe.Slice((*unsafe.Pointer)(at), nb)
	at = unsafe.Add(at, uintptr(nb)*ptr)
	r.sizes = unsafe.Slice((*C.size_t)(at), nb)
	at = unsafe.Add(at, uintptr(nb)*unsafe.Sizeof(C.size_t(0)))
	r.kinds = unsafe.Slice((*C.int)(at), nb)
	copy(r.sizes, sizes)
	copy(r.kinds, kinds)
	return r, nil
}

// first returns the address of the first element of s, or nil when s is
// empty.
func first[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// open makes the streams, events and buffers.
func (r *rawSession) open() error {
	return r.b.drv.check("dr_raw_session_open", C.dr_raw_session_open(r.b.drv.api, r.d.ctx,
		first(r.streams), C.int(len(r.streams)), C.int(r.prio), first(r.events), C.int(len(r.events)),
		first(r.bufs), first(r.sizes), first(r.kinds), C.int(len(r.bufs))))
}

// close releases them.
func (r *rawSession) close() error {
	return r.b.drv.check("dr_raw_session_close", C.dr_raw_session_close(r.b.drv.api, r.d.ctx,
		first(r.streams), C.int(len(r.streams)), first(r.events), C.int(len(r.events)),
		first(r.bufs), first(r.kinds), C.int(len(r.bufs))))
}

// free releases the raw session's C memory; close it first.
func (r *rawSession) free() {
	if r.mem != nil {
		C.free(r.mem)
		r.mem = nil
	}
}
