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
	"runtime/cgo"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Kernel preparation: what Run does for each op, decided at Open, with
// the C records (launch parameters, host work) it needs.

type opState struct {
	op     *dag.Op
	act    action
	launch *C.dr_launch   // actLaunch, actFill64
	slots  []ptrSlot      // launch slots that hold pointers into temporary buffers
	work   *C.dr_hostwork // actHostWork
	handle cgo.Handle     // actHostFunc
	fill   uint64         // actFillDevice: the element pattern
	esize  int            // actFillDevice: element size
	count  int64          // actFillDevice: elements
}

// ptrSlot is a launch argument that is a pointer into a buffer whose
// address changes from run to run.
type ptrSlot struct {
	slot   *uint64
	buf    int
	offset int64
}

// fillNeedsKernel reports whether a device fill has 8-byte elements whose
// halves differ, which no cuMemsetD* call can write.
func fillNeedsKernel(op *dag.Op) bool {
	dt := op.Access[0].Buf.DType
	if dt.Size() != 8 {
		return false
	}
	return fill64Needed(fillPattern(dt, op.FillValue))
}

func fillPattern(dt dag.DType, v float64) uint64 {
	var p uint64
	for i, c := range dag.ElemBytes(dt, v) {
		p |= uint64(c) << (8 * i)
	}
	return p
}

// prepare decides what Run does for op and builds the C records it needs,
// with the preparer of op's kind.
func (sm *submitter) prepare(st *opState, op *dag.Op) error {
	st.op = op
	p, ok := preparers[op.Kind]
	if !ok {
		return fmt.Errorf("unknown op kind %s", op.Kind)
	}
	return p(sm, st, op)
}

// prepareGemm and prepareCollective hand an op to the part that prepares
// it.
func prepareGemm(sm *submitter, st *opState, op *dag.Op) error {
	return sm.gemms.prepareGemm(st, op)
}

func prepareCollective(sm *submitter, st *opState, op *dag.Op) error {
	return sm.colls.prepareCollective(st, op)
}

// preparers holds, for every op kind of dag.OpKinds() (TestKindTable
// checks), how the backend prepares an op of that kind.
var preparers = map[dag.OpKind]func(sm *submitter, st *opState, op *dag.Op) error{
	dag.Alloc:  prepareLifetime,
	dag.Free:   prepareLifetime,
	dag.Copy:   prepareCopy,
	dag.Fill:   prepareFill,
	dag.Launch: prepareLaunch,
	dag.Host:   prepareHost,
	dag.Gemm:   prepareGemm,

	dag.AllReduce:     prepareCollective,
	dag.AllGather:     prepareCollective,
	dag.ReduceScatter: prepareCollective,
	dag.Broadcast:     prepareCollective,
	dag.Send:          prepareCollective,
	dag.Recv:          prepareCollective,

	dag.Task:     prepareTask,
	dag.Memset2D: prepareMemset2D,

	dag.While: prepareControl,
	dag.If:    prepareControl,
}

// prepareLifetime prepares an alloc or free of a temporary: stream-ordered
// pool memory on a device; a host temporary lives as long as the session
// and is zeroed at each alloc.
func prepareLifetime(sm *submitter, st *opState, op *dag.Op) error {
	bs := &sm.hold.bufs[op.Buffer().ID]
	allocs := op.Kind.Info().Lifetime == dag.Allocates
	switch {
	case bs.b.Placement != dag.Device:
		if allocs {
			// Temporaries start as zeros on every backend.
			return sm.hostWork(st, 1, bs.host, nil, bs.b.Size, []byte{0})
		}
		st.act = actNone
	case allocs:
		st.act = actAllocDevice
	default:
		st.act = actFreeDevice
	}
	return nil
}

func prepareFill(sm *submitter, st *opState, op *dag.Op) error {
	a := op.Access[0]
	dt := a.Buf.DType
	n := a.Size / dt.Size()
	if a.Buf.Placement != dag.Device {
		return sm.hostWork(st, 1, unsafe.Add(sm.hold.bufs[a.Buf.ID].host, a.Offset), nil, n, dag.ElemBytes(dt, op.FillValue))
	}
	st.fill, st.esize, st.count = fillPattern(dt, op.FillValue), int(dt.Size()), n
	st.act = actFillDevice
	if !fillNeedsKernel(op) {
		return nil
	}
	st.act = actFill64
	d := sm.hold.devs[op.Device]
	if err := sm.newLaunch(st, 3); err != nil {
		return err
	}
	l := st.launch
	l.f = d.fill64
	l.gx, l.gy, l.gz, l.bx, l.by, l.bz = C.uint(min(max((n+255)/256, 1), 4096)), 1, 1, 256, 1, 1
	slots := unsafe.Slice(l.slots, 3)
	sm.setPtr(st, &slots[0], a.View)
	slots[1] = C.uint64_t(n)
	slots[2] = C.uint64_t(st.fill)
	return nil
}

// prepareHost makes the handle through which the driver's callback finds
// the host step and its views.
func prepareHost(sm *submitter, st *opState, op *dag.Op) error {
	mem := make([][]byte, len(op.Access))
	for i, a := range op.Access {
		mem[i] = unsafe.Slice((*byte)(unsafe.Add(sm.hold.bufs[a.Buf.ID].host, a.Offset)), a.Size)
	}
	st.handle = cgo.NewHandle(&hostCall{host: sm.host, op: op, mem: mem})
	sm.hold.track(&sm.hold.live.Callbacks, 1)
	st.act = actHostFunc
	return nil
}

func prepareCopy(sm *submitter, st *opState, op *dag.Op) error {
	src, dst := op.Access[0], op.Access[1]
	sp, dp := src.Buf.Placement, dst.Buf.Placement
	switch {
	case sp != dag.Device && dp != dag.Device:
		return sm.hostWork(st, 0, unsafe.Add(sm.hold.bufs[dst.Buf.ID].host, dst.Offset), unsafe.Add(sm.hold.bufs[src.Buf.ID].host, src.Offset), src.Size, nil)
	case sp == dag.Device && dp == dag.Device:
		st.act = actCopyDtoD
		if src.Buf.Device != dst.Buf.Device {
			return sm.stage.preparePeerCopy(st, op)
		}
	case dp == dag.Device && sp == dag.Pinned:
		st.act = actCopyHtoD
	case dp == dag.Device:
		st.act = actCopyHtoDPageable
	default:
		st.act = actCopyDtoH
	}
	return nil
}

// hostWork prepares a C-only copy (kind 0) or fill (kind 1, n elements of
// pattern) run in stream order on a driver thread.
func (sm *submitter) hostWork(st *opState, kind int, dst, src unsafe.Pointer, n int64, pattern []byte) error {
	w := (*C.dr_hostwork)(C.calloc(1, C.sizeof_dr_hostwork))
	if w == nil {
		return errors.New("out of host memory")
	}
	sm.hold.track(&sm.hold.live.HostAllocs, 1)
	w.kind, w.dst, w.src, w.n = C.int(kind), dst, src, C.size_t(n)
	for i, c := range pattern {
		w.pat[i] = C.uchar(c)
	}
	w.patlen = C.int(len(pattern))
	st.work, st.act = w, actHostWork
	return nil
}

func (sm *submitter) newLaunch(st *opState, nslots int) error {
	l := C.dr_launch_new(C.int(nslots))
	if l == nil {
		return errors.New("out of host memory")
	}
	st.launch = l
	sm.hold.track(&sm.hold.live.HostAllocs, 1)
	return nil
}

// setPtr stores v's device address in slot, now if it is fixed, or at each
// Run if v's buffer is temporary.
func (sm *submitter) setPtr(st *opState, slot *C.uint64_t, v dag.View) {
	bs := &sm.hold.bufs[v.Buf.ID]
	if bs.b.Temporary {
		st.slots = append(st.slots, ptrSlot{slot: (*uint64)(unsafe.Pointer(slot)), buf: v.Buf.ID, offset: v.Offset})
		return
	}
	*slot = C.uint64_t(uint64(bs.dptr) + uint64(v.Offset))
}

// prepareLaunch builds op's kernel parameters in C memory. Builtin kernels
// get each buffer as (pointer, int64 f32 element count); other kernels get
// a bare pointer. Scalars follow their declared types.
func prepareLaunch(sm *submitter, st *opState, op *dag.Op) error {
	l := op.Launch
	k := l.Kernel
	builtin := k.Source == dag.Builtin
	n := 0
	for _, p := range k.Params {
		n++
		if p.Kind == dag.BufferParam && builtin {
			n++
		}
	}
	if err := sm.newLaunch(st, n); err != nil {
		return err
	}
	st.act = actLaunch
	cl := st.launch
	cl.f = sm.hold.devs[op.Device].funcs[k]
	cl.gx, cl.gy, cl.gz = C.uint(l.Grid.X), C.uint(l.Grid.Y), C.uint(l.Grid.Z)
	cl.bx, cl.by, cl.bz = C.uint(l.Block.X), C.uint(l.Block.Y), C.uint(l.Block.Z)
	cl.shared = C.uint(l.Shared)
	slots := unsafe.Slice(cl.slots, n)
	i := 0
	for pi, p := range k.Params {
		a := l.Args[pi]
		switch p.Kind {
		case dag.BufferParam:
			v := op.Access[a.Access].View
			sm.setPtr(st, &slots[i], v)
			if builtin {
				i++
				slots[i] = C.uint64_t(v.Size / k.ParamDType(pi).Size())
			}
		case dag.I32Param:
			slots[i] = C.uint64_t(uint32(int32(a.Int)))
		case dag.I64Param:
			slots[i] = C.uint64_t(uint64(a.Int))
		case dag.F32Param:
			slots[i] = C.uint64_t(math.Float32bits(float32(a.Float)))
		case dag.F64Param:
			slots[i] = C.uint64_t(math.Float64bits(a.Float))
		default:
			return fmt.Errorf("parameter %s has unknown kind %s", p.Name, p.Kind)
		}
		i++
	}
	return nil
}
