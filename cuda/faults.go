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
	"math"
	"runtime/cgo"
	"time"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/hostmem"
)

// Fault injection (device.Delayer, device.Failer) and memory figures
// (device.Memory).

var (
	_ device.Delayer = (*Session)(nil)
	_ device.Failer  = (*Session)(nil)
	_ device.Memory  = (*Backend)(nil)
)

// errNotOpened is the error of a Session not made by Backend.Open.
var errNotOpened = errors.New("cuda: the session was not opened; open sessions with Backend.Open")

// unopened reports why se cannot take calls when it is the zero Session
// (whose parts have no session: se is then nil).
func unopened(se *Session) error {
	if se == nil || se.b == nil || se.drv == nil {
		return errNotOpened
	}
	return nil
}

// faultState is what the injected faults of a session hold until Close.
type faultState struct {
	se      *Session
	handles []cgo.Handle // of the host calls Fail enqueued
}

// Delay does the work of Session.Delay.
func (fs *faultState) Delay(si int, d time.Duration) error {
	se := fs.se
	if err := fs.usableForFaults("Delay"); err != nil {
		return err
	}
	s, err := se.sub.stream(si)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("cuda: Delay: negative pause %v", d)
	}
	f, ok := s.dev.funcs[dag.Spin]
	if !ok {
		if f, err = se.b.kernel(s.dev.gpu, dag.Spin); err != nil {
			return fmt.Errorf("cuda: Delay: the spin kernel on device %d: %w", s.dev.ordinal, err)
		}
		s.dev.funcs[dag.Spin] = f
	}
	l := C.dr_launch_new(1)
	if l == nil {
		return errors.New("cuda: Delay: out of host memory")
	}
	// The driver copies the arguments at the launch: l can go at once.
	defer C.free(unsafe.Pointer(l))
	l.f = f
	l.gx, l.gy, l.gz, l.bx, l.by, l.bz = 1, 1, 1, 1, 1, 1
	unsafe.Slice(l.slots, 1)[0] = C.uint64_t(math.Float64bits(float64(d) / float64(time.Microsecond)))
	return se.drv.check("cuLaunchKernel", C.dr_launch_kernel(se.drv.api, s.dev.ctx, l, s.h))
}

// Fail does the work of Session.Fail.
func (fs *faultState) Fail(si int, op *dag.Op, err error) error {
	se := fs.se
	if e := fs.usableForFaults("Fail"); e != nil {
		return e
	}
	s, e := se.sub.stream(si)
	if e != nil {
		return e
	}
	if op == nil || err == nil {
		return errors.New("cuda: Fail: give the op that fails and its error")
	}
	failing := &dag.Op{ID: op.ID, Name: op.Name, Kind: dag.Host,
		HostFunc: func(context.Context, [][]byte) error { return err }}
	h := cgo.NewHandle(&hostCall{se: se, op: failing})
	if e := se.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(se.drv.api, s.dev.ctx, C.uintptr_t(h), s.h)); e != nil {
		h.Delete()
		return e
	}
	fs.handles = append(fs.handles, h)
	se.hold.track(&se.hold.live.Callbacks, 1)
	return nil
}

// usableForFaults says why faults cannot be enqueued now, if they
// cannot; after an abandoned run it first resumes, as Run does, so that a
// failure enqueued before any op of the run is not skipped as abandoned
// work.
func (fs *faultState) usableForFaults(verb string) error {
	se := fs.se
	if err := unopened(se); err != nil {
		return err
	}
	if se.closed {
		return fmt.Errorf("cuda: %s: the session is %w", verb, device.ErrClosed)
	}
	if se.capt.capture != nil {
		return fmt.Errorf("cuda: %s: faults cannot be captured in a graph", verb)
	}
	if se.host.abandoned.Load() {
		if err := se.host.resume(); err != nil {
			return fmt.Errorf("cuda: %s: %w", verb, err)
		}
	}
	return nil
}

// closeFaults releases the host calls of Fail; the streams are idle.
func (fs *faultState) closeFaults() {
	se := fs.se
	for _, h := range fs.handles {
		h.Delete()
		se.hold.track(&se.hold.live.Callbacks, -1)
	}
	fs.handles = nil
}

// FreeMemory reports the memory of device ordinal (cuMemGetInfo in its
// primary context), or host memory for device.HostMemory: MemAvailable
// capped by the cgroup's limit.
func (b *Backend) FreeMemory(ordinal int) (free, total int64, err error) {
	if ordinal == device.HostMemory {
		return hostmem.Available()
	}
	if b == nil || b.drv == nil {
		return 0, 0, errors.New("cuda: FreeMemory: no backend; make one with cuda.New")
	}
	d, err := b.device(ordinal)
	if err != nil {
		return 0, 0, err
	}
	f, t, err := b.drv.memInfo(d.ctx)
	if err != nil {
		return 0, 0, err
	}
	return int64(min(f, math.MaxInt64)), int64(min(t, math.MaxInt64)), nil
}

// afterFailedRun frees the device temporaries a failed run left allocated
// (their frees were skipped or never submitted: a failure stops the
// executor's submission), so that the next run can allocate them again.
// The streams are idle then; after an abandoned run (ctx ended) they may
// not be, and the temporaries wait for Close.
func (fs *faultState) afterFailedRun(ctx context.Context, err error) {
	se := fs.se
	if err == nil || ctx.Err() != nil {
		return
	}
	for i := range se.hold.bufs {
		bs := &se.hold.bufs[i]
		if bs.b.Temporary && bs.b.Placement == dag.Device && bs.dptr != 0 && !bs.inArena {
			if se.drv.memFree(bs.dev.ctx, bs.dptr) == nil {
				bs.dptr = 0
				se.hold.track(&se.hold.live.PoolAllocs, -1)
			}
		}
	}
}
