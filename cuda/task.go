package cuda

/*
#include <stdint.h>
#include "cuda.h"

static CUresult w_memset32_on(dr_api* a, CUcontext c, CUdeviceptr d, unsigned int v, size_t n, uintptr_t s) {
	return dr_memset_async(a, c, d, 4, v, n, (CUstream)s);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Stream tasks (dag.Task): the user's function enqueues the op's work on
// the op's stream. It runs in plan order on the submitting goroutine, with
// the goroutine locked to its OS thread and the op's device context made
// current on it for the call: the session's own driver calls set the
// context per call, but a library the function calls (cuBLAS, the user's
// cgo) uses whatever is current on the thread.

// prepareTask: nothing to build; the addresses are taken at each Run, as a
// temporary's change from run to run.
func prepareTask(sm *submitter, st *opState, op *dag.Op) error {
	if op.Task == nil || op.Task.Func == nil {
		return fmt.Errorf("stream task has no function")
	}
	st.act = actTask
	return nil
}

// runTask calls the task's function with s and the addresses of its views.
func runTask(sm *submitter, s *stream, st *opState) error {
	op := st.op
	addrs := make([]uintptr, len(op.Access))
	for i, a := range op.Access {
		bs := &sm.hold.bufs[a.Buf.ID]
		if a.Buf.Placement != dag.Device {
			// Pinned memory is mapped: its host address is valid on the device.
			addrs[i] = uintptr(unsafe.Add(bs.host, a.Offset))
			continue
		}
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		addrs[i] = uintptr(bs.dptr) + uintptr(a.Offset)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := sm.drv.check("cuCtxSetCurrent", C.dr_ctx(sm.drv.api, s.dev.ctx)); err != nil {
		return err
	}
	return callTask(op.Task.Func, sm.host.hostCtx, dag.TaskStream{Handle: uintptr(unsafe.Pointer(s.h)), Device: s.dev.ordinal, Addrs: addrs})
}

// callTask runs fn, turning a panic in it into an error.
func callTask(fn dag.TaskFunc, ctx context.Context, on dag.TaskStream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stream task panicked: %v", r)
		}
	}()
	if err := fn(ctx, on); err != nil {
		return fmt.Errorf("stream task: %w", err)
	}
	return nil
}

// MemsetD32 enqueues, on a stream task's stream, the setting of count
// 4-byte words from device address addr to value (cuMemsetD32Async): a
// helper for tasks, which need no driver binding of their own to clear an
// output before a library accumulates into it. Call it only from the
// task's function, with the task's TaskStream.
func (b *Backend) MemsetD32(on dag.TaskStream, addr uintptr, value uint32, count int) error {
	if on.Handle == 0 || addr == 0 || count < 0 {
		return fmt.Errorf("cuda: MemsetD32: stream %#x, address %#x, count %d: pass a task's stream, a device address and a count >= 0", on.Handle, addr, count)
	}
	d, err := b.device(on.Device)
	if err != nil {
		return err
	}
	s := C.uintptr_t(on.Handle)
	return b.drv.check("cuMemsetD32Async", C.w_memset32_on(b.drv.api, d.ctx, C.CUdeviceptr(addr), C.uint(value), C.size_t(count), s))
}
