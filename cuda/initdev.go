package cuda

/*
#include "cuda.h"

// Launches on the context's legacy stream, of one shape: 256 threads a
// block. The parameters live on this frame, which the launch copies.
static CUresult w_init_random(dr_api* a, CUcontext c, CUfunction f, unsigned int grid, CUdeviceptr x, long long n, unsigned long long seed, int dt) {
	void* params[] = {&x, &n, &seed, &dt};
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
}
static CUresult w_fill64(dr_api* a, CUcontext c, CUfunction f, unsigned int grid, CUdeviceptr x, long long n, unsigned long long v) {
	void* params[] = {&x, &n, &v};
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Initial contents made on the device: a device buffer's random or value
// contents are generated where they live (dagrun_init_random, a memset or
// dagrun_fill64) instead of being made on the host and uploaded, bit for
// bit what dag.Buffer.WriteInitial makes. The work goes on each context's
// legacy stream and allocBuffers waits for it once, at the end; dagrun's
// own streams are non-blocking, so they would not wait for it.

// deviceInitLoadMin is the smallest buffer for which the builtin module is
// loaded only to make initial contents (a graph that launches no builtin):
// below it, making the bytes on the host and uploading them costs less
// than loading the module (compiling it, the first time on a machine).
const deviceInitLoadMin = 1 << 20

// initOnDevice enqueues the making of device buffer bs's initial contents
// (InitRandom or InitValue) on its context's legacy stream. It reports
// false, having enqueued nothing, where that needs the builtin module and
// the device has none: the caller then uploads the bytes.
func (hd *holdings) initOnDevice(bs *buffer) (bool, error) {
	if hd.b.initOnHost {
		return false, nil
	}
	buf := bs.b
	dt := buf.DType
	esize := dt.Size()
	n := buf.Size / esize
	var err error
	switch {
	case n == 0: // no whole element: only the tail below
		hd.pendInit(bs.dev)
	case buf.Init.Kind == dag.InitRandom:
		f := hd.builtin(bs, func(d *gpu) C.CUfunction { return d.initRandom })
		if f == nil {
			return false, nil
		}
		hd.pendInit(bs.dev)
		err = hd.drv.check("cuLaunchKernel", C.w_init_random(hd.drv.api, bs.dev.ctx, f, initGrid(n), bs.dptr, C.longlong(n), C.ulonglong(buf.Init.Seed), C.int(dt)))
	case buf.Init.Kind != dag.InitValue:
		return false, errors.New("initOnDevice: not a random or value buffer")
	case esize == 8 && fill64Needed(fillPattern(dt, buf.Init.Value)):
		f := hd.builtin(bs, func(d *gpu) C.CUfunction { return d.fill64 })
		if f == nil {
			return false, nil
		}
		hd.pendInit(bs.dev)
		err = hd.drv.check("cuLaunchKernel", C.w_fill64(hd.drv.api, bs.dev.ctx, f, initGrid(n), bs.dptr, C.longlong(n), C.ulonglong(fillPattern(dt, buf.Init.Value))))
	default:
		hd.pendInit(bs.dev)
		err = hd.drv.check(memsetCall(esize), C.dr_memset_async(hd.drv.api, bs.dev.ctx, bs.dptr, C.int(esize), C.uint64_t(fillPattern(dt, buf.Init.Value)), C.size_t(n), nil))
	}
	if err != nil {
		return true, err
	}
	// Bytes past the last whole element stay zero, as WriteInitial leaves
	// them (Build refuses such sizes; a hand-made graph may have them).
	if tail := buf.Size - n*esize; tail > 0 {
		err = hd.drv.check("cuMemsetD8Async", C.dr_memset_async(hd.drv.api, bs.dev.ctx, bs.dptr+C.CUdeviceptr(n*esize), 1, 0, C.size_t(tail), nil))
	}
	hd.deviceInits++
	return true, err
}

// fill64Needed reports whether 8-byte pattern v needs dagrun_fill64: its
// halves differ, so no cuMemsetD32 makes it.
func fill64Needed(v uint64) bool { return v>>32 != v&0xffffffff }

// memsetCall names the driver call dr_memset_async makes for elements of
// esize bytes.
func memsetCall(esize int64) string {
	switch esize {
	case 1:
		return "cuMemsetD8Async"
	case 2:
		return "cuMemsetD16Async"
	}
	return "cuMemsetD32Async"
}

// initGrid is the grid of an initial-contents kernel of n elements: one
// element a thread up to 4096 blocks, which the grid-stride loop covers.
func initGrid(n int64) C.uint {
	return C.uint(min(max((n+255)/256, 1), 4096))
}

// zeroOnDevice enqueues the zeroing of device buffer bs on its context's
// legacy stream, waited for with the initial contents.
func (hd *holdings) zeroOnDevice(bs *buffer) error {
	hd.pendInit(bs.dev)
	return hd.drv.check("cuMemsetD8Async", C.dr_memset_async(hd.drv.api, bs.dev.ctx, bs.dptr, 1, 0, C.size_t(bs.b.Size), nil))
}

// builtin returns the builtin function pick chooses on bs's device, or nil
// where the device has no builtin module and bs is too small to load it
// for (deviceInitLoadMin), or it fails to load: a graph that launches no
// builtin opens without NVRTC, as before.
func (hd *holdings) builtin(bs *buffer, pick func(*gpu) C.CUfunction) C.CUfunction {
	b, d := hd.b, bs.dev
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := d.modules[builtinsKey]; !ok {
		if bs.b.Size < deviceInitLoadMin || d.noBuiltins {
			return nil
		}
		if _, err := b.module(d.gpu, builtinsKey, nil); err != nil {
			d.noBuiltins = true // not again for every buffer of the session
			return nil
		}
	}
	return pick(d.gpu)
}

// pendInit notes that d's legacy stream holds initial contents to wait for.
func (hd *holdings) pendInit(d *sessDevice) {
	for _, p := range hd.initPending {
		if p == d {
			return
		}
	}
	hd.initPending = append(hd.initPending, d)
}

// waitInits waits until the initial contents of every device are made:
// what the synchronous uploads guaranteed, before any op runs.
func (hd *holdings) waitInits() error {
	var errs []error
	for _, d := range hd.initPending {
		if err := hd.drv.streams.sync(d.ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("making initial contents on device %d: %w", d.ordinal, err))
		}
	}
	hd.initPending = nil
	return errors.Join(errs...)
}
