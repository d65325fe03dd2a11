package cuda

/*
#include <stdint.h>
#include "cuda.h"

// dr_memset2d_async sets height rows of width elements of elemsize bytes,
// pitch bytes apart, with the driver's 2-D memset of that element size.
static CUresult dr_memset2d_async(dr_api* a, CUcontext c, CUdeviceptr d, size_t pitch, int elemsize, uint32_t pattern, size_t width, size_t height, CUstream s) {
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	switch (elemsize) {
	case 1: return a->cuMemsetD2D8Async(d, pitch, (unsigned char)pattern, width, height, s);
	case 2: return a->cuMemsetD2D16Async(d, pitch, (unsigned short)pattern, width, height, s);
	case 4: return a->cuMemsetD2D32Async(d, pitch, (unsigned int)pattern, width, height, s);
	}
	return 1; // CUDA_ERROR_INVALID_VALUE: dag refuses wider elements
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// 2-D memsets (dag.Memset2D): cuMemsetD2D8/16/32Async on device memory;
// on host memory a host callback sets the rows, as a host step would.

func prepareMemset2D(sm *submitter, st *opState, op *dag.Op) error {
	a := op.Access[0]
	if op.Memset2D == nil {
		return fmt.Errorf("memset2d has no region")
	}
	dt := a.Buf.DType
	if a.Buf.Placement == dag.Device {
		if es := dt.Size(); es != 1 && es != 2 && es != 4 {
			return fmt.Errorf("memset2d of %s elements: the driver's 2-D memsets write 1, 2 or 4 bytes an element", dt)
		}
		st.fill, st.esize = fillPattern(dt, op.FillValue), int(dt.Size())
		st.act = actMemset2D
		return nil
	}
	mem := [][]byte{unsafe.Slice((*byte)(unsafe.Add(sm.hold.bufs[a.Buf.ID].host, a.Offset)), a.Size)}
	set := *op
	set.HostFunc = func(_ context.Context, mem [][]byte) error {
		op.Memset2DRows(func(start, end int64) { dag.FillElems(mem[0][start:end], dt, op.FillValue) })
		return nil
	}
	st.handle = cgo.NewHandle(&hostCall{host: sm.host, op: &set, mem: mem})
	sm.hold.track(&sm.hold.live.Callbacks, 1)
	st.act = actHostFunc
	return nil
}

// memset2DCalls names the driver call for each element size, for errors.
var memset2DCalls = [...]string{1: "cuMemsetD2D8Async", 2: "cuMemsetD2D16Async", 4: "cuMemsetD2D32Async"}

func runMemset2D(sm *submitter, s *stream, st *opState) error {
	m, v := st.op.Memset2D, st.op.Access[0].View
	return sm.drv.check(memset2DCalls[st.esize], C.dr_memset2d_async(sm.drv.api, s.dev.ctx, sm.hold.ptr(v), C.size_t(m.Pitch),
		C.int(st.esize), C.uint32_t(st.fill), C.size_t(m.Width), C.size_t(m.Rows), s.h))
}
