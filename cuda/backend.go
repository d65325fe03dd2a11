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
	"runtime"
	"runtime/cgo"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Backend runs plans on CUDA devices. It implements the executor's Backend
// and Timer interfaces: one goroutine at a time calls it, in the order
// New, SetTiming, Open, NewStream/NewEvent, then Record/Wait/Run and Sync
// for each run, Read, Close. After Close it may be opened again. The driver
// library stays loaded for the life of the process: unloading it while its
// threads run is unsafe.
type Backend struct {
	drv    *driver
	comp   compiler
	timing bool

	g       *dag.Graph
	devs    map[int]*device
	bufs    []buffer  // by Buffer.ID
	ops     []opState // by Op.ID
	streams []stream
	events  []event
	live    Resources

	// Host steps run on driver threads; they read hostCtx and report here.
	hostCtx    context.Context
	hostCancel context.CancelFunc
	abandoned  atomic.Bool
	hostMu     sync.Mutex
	hostErr    error

	timed     []timedOp
	spanEvs   []C.CUevent // Spans' scratch: the events of one device's timed ops
	spanAt    []int       // ... the index in timed of each pair of them
	spanDevMs []float32   // ... and their times
	spanMs    []float32   // the start and end of every timed op

	// Graph capture (graph.go).
	graphs   []*graph // by number; nil once destroyed
	capture  *capture // the capture in progress, if any
	gstats   GraphStats
	variants map[*dag.Op]*opState // C records of op variants that captured host nodes point at

	gemm *gemmer // cuBLASLt GEMMs (cublas.go); nil until an op needs one
}

// Resources counts what a Backend holds; all zero after Close.
type Resources struct {
	Contexts     int // retained primary contexts
	Streams      int
	Events       int // plan events and timing events
	Modules      int
	DeviceAllocs int // persistent device buffers (cuMemAlloc)
	PoolAllocs   int // temporary device buffers allocated from the pool and not yet freed
	PinnedAllocs int // pinned host buffers (cuMemHostAlloc)
	HostAllocs   int // C heap blocks: pageable buffers and per-op launch records
	Callbacks    int // host-step handles
	Graphs       int // captured graphs and their executables
}

// Total is the number of resources held.
func (r Resources) Total() int {
	return r.Contexts + r.Streams + r.Events + r.Modules + r.DeviceAllocs + r.PoolAllocs +
		r.PinnedAllocs + r.HostAllocs + r.Callbacks + r.Graphs
}

type device struct {
	ordinal         int
	info            deviceInfo
	ctx             C.CUcontext
	least, greatest int
	pool            C.CUmemoryPool
	builtins        C.CUmodule // nil until a builtin kernel or a 64-bit fill needs it
	modules         []C.CUmodule
	funcs           map[*dag.Kernel]C.CUfunction
	fill64          C.CUfunction
	timingEvents    []C.CUevent // recorded ones come back here after Spans
	origin          C.CUevent   // the current run's time origin; nil before its first op
}

type buffer struct {
	b    *dag.Buffer
	dev  *device        // device buffers: their device
	dptr C.CUdeviceptr  // device buffers; 0 while a temporary is not allocated
	host unsafe.Pointer // host buffers
}

// action is what Run does for an op, decided at Open.
type action uint8

const (
	actNone action = iota
	actAllocDevice
	actFreeDevice
	actLaunch
	actFillDevice
	actFill64
	actHostWork // copies and fills of host memory only, run by a C callback
	actHostFunc
	actCopyDtoD
	actCopyPeer
	actCopyHtoD
	actCopyHtoDPageable
	actCopyDtoH
	actGemm // cublas_backend.go
)

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

type stream struct {
	h    C.CUstream
	dev  *device
	last string // the name of the last op run on it, for asynchronous errors
}

type event struct {
	h   C.CUevent
	dev *device
}

type timedOp struct {
	op, stream int
	dev        *device
	start, end C.CUevent
}

// New loads the CUDA driver. The error matches ErrNoDriver when there is
// none to use.
func New(opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	drv, err := openDriver(libcudaCandidates(cfg.libcuda))
	if err != nil {
		return nil, err
	}
	return &Backend{
		drv:  drv,
		comp: compiler{candidates: nvrtcCandidates(cfg.nvrtc), cacheDir: cfg.cacheDir},
	}, nil
}

// Live reports what the backend holds now.
func (b *Backend) Live() Resources { return b.live }

// SetTiming turns op timing on or off; call it before Open.
func (b *Backend) SetTiming(on bool) { b.timing = on }

// DriverVersion is the CUDA version of the driver, for example 13000.
func (b *Backend) DriverVersion() int { return b.drv.version }

// Open loads the kernels g launches and allocates its persistent buffers
// with their initial contents. On error it releases what it made.
func (b *Backend) Open(ctx context.Context, g *dag.Graph) (err error) {
	if b.g != nil {
		return errors.New("cuda: backend is already open; close it first")
	}
	b.g = g
	b.devs = map[int]*device{}
	b.abandoned.Store(false)
	b.hostCtx, b.hostCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	count, err := b.drv.deviceCount()
	if err != nil {
		return err
	}
	for _, buf := range g.Buffers {
		if buf.Placement == dag.Device && buf.Device >= count {
			return &dag.Error{Buffer: buf.Name, Field: "device", Msg: fmt.Sprintf("device %d does not exist: this machine has %d", buf.Device, count),
				Hint: fmt.Sprintf("use a device from 0 to %d", count-1)}
		}
	}
	for _, op := range g.Ops {
		if op.Device >= count {
			return &dag.Error{Op: op.Name, Field: "device", Msg: fmt.Sprintf("device %d does not exist: this machine has %d", op.Device, count),
				Hint: fmt.Sprintf("use a device from 0 to %d", count-1)}
		}
	}
	if err := b.loadKernels(ctx); err != nil {
		return err
	}
	if err := b.allocBuffers(ctx); err != nil {
		return err
	}
	b.ops = make([]opState, len(g.Ops))
	for i, op := range g.Ops {
		if op.ID != i {
			return &dag.Error{Op: op.Name, Msg: fmt.Sprintf("has ID %d at index %d", op.ID, i), Hint: "pass a graph made by dag.Builder.Build"}
		}
		if err := b.prepare(&b.ops[i], op); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	return nil
}

// device returns the open context of device ordinal, retaining its primary
// context on first use.
func (b *Backend) device(ordinal int) (*device, error) {
	if d := b.devs[ordinal]; d != nil {
		return d, nil
	}
	info, err := b.drv.device(ordinal)
	if err != nil {
		return nil, err
	}
	c, err := b.drv.retainPrimary(info.dev)
	if err != nil {
		return nil, err
	}
	d := &device{ordinal: ordinal, info: info, ctx: c, funcs: map[*dag.Kernel]C.CUfunction{}}
	b.devs[ordinal] = d
	b.live.Contexts++
	if d.least, d.greatest, err = b.drv.priorityRange(c); err != nil {
		return nil, err
	}
	if d.pool, err = b.drv.poolSetup(c, info.dev); err != nil {
		return nil, err
	}
	return d, nil
}

// loadKernels loads every kernel g launches on each device that launches it.
func (b *Backend) loadKernels(ctx context.Context) error {
	for _, op := range b.g.Ops {
		needFill64 := op.Kind == dag.Fill && op.Access[0].Buf.Placement == dag.Device && fillNeedsKernel(op)
		if op.Kind != dag.Launch && !needFill64 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := b.device(op.Device)
		if err != nil {
			return err
		}
		if needFill64 {
			if err := b.loadBuiltins(d); err != nil {
				return err
			}
			continue
		}
		k := op.Launch.Kernel
		if _, ok := d.funcs[k]; ok {
			continue
		}
		f, err := b.loadKernel(d, k)
		if err != nil {
			return fmt.Errorf("kernel %q on device %d: %w", k.Name, d.ordinal, err)
		}
		d.funcs[k] = f
	}
	return nil
}

func (b *Backend) loadBuiltins(d *device) error {
	if d.builtins != nil {
		return nil
	}
	img, err := b.comp.compile(builtinSource, "dagrun_builtins.cu", d.info.major, d.info.minor)
	if err != nil {
		return fmt.Errorf("builtin kernels: %w", err)
	}
	m, err := b.drv.moduleLoad(d.ctx, img.data)
	if err != nil {
		return fmt.Errorf("builtin kernels: %w", err)
	}
	d.builtins = m
	b.live.Modules++
	d.fill64, err = b.drv.function(d.ctx, m, fill64Kernel)
	return err
}

func (b *Backend) loadKernel(d *device, k *dag.Kernel) (C.CUfunction, error) {
	var m C.CUmodule
	switch k.Source {
	case dag.Builtin:
		if err := b.loadBuiltins(d); err != nil {
			return nil, err
		}
		m = d.builtins
	case dag.CUDAC, dag.PTX, dag.Cubin:
		var data []byte
		if k.Source == dag.CUDAC {
			img, err := b.comp.compile(k.Code, k.Name+".cu", d.info.major, d.info.minor)
			if err != nil {
				return nil, err
			}
			data = img.data
		} else {
			var err error
			if data, err = readKernelFile(k.Path); err != nil {
				return nil, err
			}
		}
		mod, err := b.drv.moduleLoad(d.ctx, data)
		if err != nil {
			return nil, err
		}
		d.modules = append(d.modules, mod)
		b.live.Modules++
		m = mod
	default:
		return nil, fmt.Errorf("unknown kernel source %s", k.Source)
	}
	f, err := b.drv.function(d.ctx, m, k.EntryName())
	var ce *Error
	if errors.As(err, &ce) && ce.Code == codeNotFound {
		return nil, fmt.Errorf("%w (the module has no entry %q: declare it extern \"C\", or set the kernel's entry to its mangled name)", err, k.EntryName())
	}
	return f, err
}

// allocBuffers allocates every persistent buffer with its initial contents
// and every temporary host buffer (host memory is not stream-ordered: a
// temporary one lives as long as the backend is open).
func (b *Backend) allocBuffers(ctx context.Context) error {
	b.bufs = make([]buffer, len(b.g.Buffers))
	for i, buf := range b.g.Buffers {
		if err := ctx.Err(); err != nil {
			return err
		}
		bs := &b.bufs[i]
		bs.b = buf
		if buf.ID != i {
			return &dag.Error{Buffer: buf.Name, Msg: fmt.Sprintf("has ID %d at index %d", buf.ID, i), Hint: "pass a graph made by dag.Builder.Build"}
		}
		ordinal := buf.Device
		if buf.Placement != dag.Device {
			ordinal = b.anyDevice()
		}
		d, err := b.device(ordinal)
		if err != nil {
			return err
		}
		bs.dev = d
		if buf.Placement == dag.Device && buf.Temporary {
			continue
		}
		if err := b.allocBuffer(bs); err != nil {
			return &dag.OpError{Op: "open", Err: fmt.Errorf("buffer %q (%d bytes, %s): %w", buf.Name, buf.Size, placeName(buf), err)}
		}
	}
	return nil
}

// anyDevice is the device host memory is pinned through: the lowest one
// the graph uses, else 0. Pinned memory is portable: every context sees it.
func (b *Backend) anyDevice() int {
	best := -1
	for _, op := range b.g.Ops {
		if best < 0 || op.Device < best {
			best = op.Device
		}
	}
	for _, buf := range b.g.Buffers {
		if buf.Placement == dag.Device && (best < 0 || buf.Device < best) {
			best = buf.Device
		}
	}
	return max(best, 0)
}

func (b *Backend) allocBuffer(bs *buffer) error {
	buf := bs.b
	switch buf.Placement {
	case dag.Device:
		p, err := b.drv.memAlloc(bs.dev.ctx, buf.Size)
		if err != nil {
			return err
		}
		bs.dptr = p
		b.live.DeviceAllocs++
		if buf.Init.Kind == dag.InitNone || buf.Init.Kind == dag.InitZeros {
			return b.drv.zero(bs.dev.ctx, p, buf.Size)
		}
		return b.drv.htod(bs.dev.ctx, p, buf.InitialBytes())
	case dag.Pinned:
		p, err := b.drv.hostAlloc(bs.dev.ctx, buf.Size)
		if err != nil {
			return err
		}
		bs.host = p
		b.live.PinnedAllocs++
	default:
		p := C.malloc(C.size_t(buf.Size))
		if p == nil {
			return errors.New("out of host memory")
		}
		bs.host = p
		b.live.HostAllocs++
	}
	copy(unsafe.Slice((*byte)(bs.host), buf.Size), buf.InitialBytes())
	return nil
}

func placeName(b *dag.Buffer) string {
	if b.Placement == dag.Device {
		return fmt.Sprintf("device %d", b.Device)
	}
	return b.Placement.String() + " host"
}

// fillNeedsKernel reports whether a device fill has 8-byte elements whose
// halves differ, which no cuMemsetD* call can write.
func fillNeedsKernel(op *dag.Op) bool {
	dt := op.Access[0].Buf.DType
	if dt.Size() != 8 {
		return false
	}
	v := fillPattern(dt, op.FillValue)
	return v>>32 != v&0xffffffff
}

func fillPattern(dt dag.DType, v float64) uint64 {
	var p uint64
	for i, c := range dag.ElemBytes(dt, v) {
		p |= uint64(c) << (8 * i)
	}
	return p
}

// prepare decides what Run does for op and builds the C records it needs.
func (b *Backend) prepare(st *opState, op *dag.Op) error {
	st.op = op
	switch op.Kind {
	case dag.Alloc, dag.Free:
		bs := &b.bufs[op.Buffer().ID]
		switch {
		case bs.b.Placement != dag.Device:
			if op.Kind == dag.Alloc {
				// Temporaries start as zeros on every backend.
				return b.hostWork(st, 1, bs.host, nil, bs.b.Size, []byte{0})
			}
			st.act = actNone
		case op.Kind == dag.Alloc:
			st.act = actAllocDevice
		default:
			st.act = actFreeDevice
		}
	case dag.Copy:
		return b.prepareCopy(st, op)
	case dag.Fill:
		a := op.Access[0]
		dt := a.Buf.DType
		n := a.Size / dt.Size()
		if a.Buf.Placement != dag.Device {
			return b.hostWork(st, 1, unsafe.Add(b.bufs[a.Buf.ID].host, a.Offset), nil, n, dag.ElemBytes(dt, op.FillValue))
		}
		st.fill, st.esize, st.count = fillPattern(dt, op.FillValue), int(dt.Size()), n
		st.act = actFillDevice
		if fillNeedsKernel(op) {
			st.act = actFill64
			d := b.devs[op.Device]
			if err := b.newLaunch(st, 3); err != nil {
				return err
			}
			l := st.launch
			l.f = d.fill64
			l.gx, l.gy, l.gz, l.bx, l.by, l.bz = C.uint(min(max((n+255)/256, 1), 4096)), 1, 1, 256, 1, 1
			slots := unsafe.Slice(l.slots, 3)
			b.setPtr(st, &slots[0], a.View)
			slots[1] = C.uint64_t(n)
			slots[2] = C.uint64_t(st.fill)
		}
	case dag.Launch:
		return b.prepareLaunch(st, op)
	case dag.Gemm:
		return b.prepareGemm(st, op)
	case dag.Host:
		mem := make([][]byte, len(op.Access))
		for i, a := range op.Access {
			mem[i] = unsafe.Slice((*byte)(unsafe.Add(b.bufs[a.Buf.ID].host, a.Offset)), a.Size)
		}
		st.handle = cgo.NewHandle(&hostCall{b: b, op: op, mem: mem})
		b.live.Callbacks++
		st.act = actHostFunc
	default:
		return fmt.Errorf("unknown op kind %s", op.Kind)
	}
	return nil
}

func (b *Backend) prepareCopy(st *opState, op *dag.Op) error {
	src, dst := op.Access[0], op.Access[1]
	sp, dp := src.Buf.Placement, dst.Buf.Placement
	switch {
	case sp != dag.Device && dp != dag.Device:
		return b.hostWork(st, 0, unsafe.Add(b.bufs[dst.Buf.ID].host, dst.Offset), unsafe.Add(b.bufs[src.Buf.ID].host, src.Offset), src.Size, nil)
	case sp == dag.Device && dp == dag.Device:
		st.act = actCopyDtoD
		if src.Buf.Device != dst.Buf.Device {
			st.act = actCopyPeer
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
func (b *Backend) hostWork(st *opState, kind int, dst, src unsafe.Pointer, n int64, pattern []byte) error {
	w := (*C.dr_hostwork)(C.calloc(1, C.sizeof_dr_hostwork))
	if w == nil {
		return errors.New("out of host memory")
	}
	b.live.HostAllocs++
	w.kind, w.dst, w.src, w.n = C.int(kind), dst, src, C.size_t(n)
	for i, c := range pattern {
		w.pat[i] = C.uchar(c)
	}
	w.patlen = C.int(len(pattern))
	st.work, st.act = w, actHostWork
	return nil
}

func (b *Backend) newLaunch(st *opState, nslots int) error {
	l := C.dr_launch_new(C.int(nslots))
	if l == nil {
		return errors.New("out of host memory")
	}
	st.launch = l
	b.live.HostAllocs++
	return nil
}

// setPtr stores v's device address in slot, now if it is fixed, or at each
// Run if v's buffer is temporary.
func (b *Backend) setPtr(st *opState, slot *C.uint64_t, v dag.View) {
	bs := &b.bufs[v.Buf.ID]
	if bs.b.Temporary {
		st.slots = append(st.slots, ptrSlot{slot: (*uint64)(unsafe.Pointer(slot)), buf: v.Buf.ID, offset: v.Offset})
		return
	}
	*slot = C.uint64_t(uint64(bs.dptr) + uint64(v.Offset))
}

// prepareLaunch builds op's kernel parameters in C memory. Builtin kernels
// get each buffer as (pointer, int64 f32 element count); other kernels get
// a bare pointer. Scalars follow their declared types.
func (b *Backend) prepareLaunch(st *opState, op *dag.Op) error {
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
	if err := b.newLaunch(st, n); err != nil {
		return err
	}
	st.act = actLaunch
	cl := st.launch
	cl.f = b.devs[op.Device].funcs[k]
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
			b.setPtr(st, &slots[i], v)
			if builtin {
				i++
				slots[i] = C.uint64_t(v.Size / k.ElemDType().Size())
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

// NewStream creates the next stream: non-blocking, on device, with
// priority mapped by StreamPriority.
func (b *Backend) NewStream(ordinal int, p dag.Priority) error {
	if b.g == nil {
		return errors.New("cuda: NewStream before Open")
	}
	d, err := b.device(ordinal)
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(b.streams), ordinal, err)
	}
	h, err := b.drv.streamCreate(d.ctx, StreamPriority(p, d.least, d.greatest))
	if err != nil {
		return fmt.Errorf("stream %d on device %d: %w", len(b.streams), ordinal, err)
	}
	b.streams = append(b.streams, stream{h: h, dev: d})
	b.live.Streams++
	return nil
}

// NewEvent creates the next event. Its driver event is made at its first
// Record, in the context of the recording stream's device.
func (b *Backend) NewEvent() error {
	if b.g == nil {
		return errors.New("cuda: NewEvent before Open")
	}
	b.events = append(b.events, event{})
	return nil
}

func (b *Backend) stream(i int) (*stream, error) {
	if i < 0 || i >= len(b.streams) {
		return nil, fmt.Errorf("cuda: stream %d does not exist (%d made)", i, len(b.streams))
	}
	return &b.streams[i], nil
}

func (b *Backend) event(i int) (*event, error) {
	if i < 0 || i >= len(b.events) {
		return nil, fmt.Errorf("cuda: event %d does not exist (%d made)", i, len(b.events))
	}
	return &b.events[i], nil
}

// Record records event e on stream si.
func (b *Backend) Record(si, ei int) error {
	s, err := b.stream(si)
	if err != nil {
		return err
	}
	if b.abandoned.Load() {
		if err := b.resume(); err != nil {
			return err
		}
	}
	e, err := b.event(ei)
	if err != nil {
		return err
	}
	if e.dev != s.dev {
		if e.h != nil {
			if err := b.drv.eventDestroy(e.dev.ctx, e.h); err != nil {
				return err
			}
			e.h = nil
			b.live.Events--
		}
		if e.h, err = b.drv.eventCreate(s.dev.ctx, false); err != nil {
			return fmt.Errorf("event %d: %w", ei, err)
		}
		e.dev = s.dev
		b.live.Events++
	}
	return b.drv.check("cuEventRecord", C.dr_record(b.drv.api, s.dev.ctx, e.h, s.h))
}

// Wait makes stream si wait for the last record of event e.
func (b *Backend) Wait(si, ei int) error {
	s, err := b.stream(si)
	if err != nil {
		return err
	}
	if b.abandoned.Load() {
		if err := b.resume(); err != nil {
			return err
		}
	}
	e, err := b.event(ei)
	if err != nil {
		return err
	}
	if e.h == nil {
		return fmt.Errorf("cuda: stream %d waits for event %d, which was never recorded", si, ei)
	}
	return b.drv.check("cuStreamWaitEvent", C.dr_wait(b.drv.api, s.dev.ctx, s.h, e.h))
}

// Run enqueues op on stream si. Errors name the op.
func (b *Backend) Run(si int, op *dag.Op) error {
	s, err := b.stream(si)
	if err != nil {
		return err
	}
	if op == nil || op.ID < 0 || op.ID >= len(b.ops) {
		return fmt.Errorf("cuda: op %v is not an op of the open graph", op)
	}
	st := &b.ops[op.ID]
	if st.op != op {
		v, err := b.variant(op)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		st = v
		if st.launch != nil && st.work == nil && st.act != actHostFunc {
			// The driver copies kernel arguments at the launch.
			defer b.dropVariant(st)
		}
	}
	if b.abandoned.Load() {
		if err := b.resume(); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	// An op is timed by events of its own before and after it, not by the
	// end of the op before it: that would hide the gaps where the device
	// waits for the host (BENCHMARKS.md has the figures).
	var start C.CUevent
	if b.timing {
		if start, err = b.timingRecord(s); err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
	}
	s.last = op.Name
	if err := b.run(s, st); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	if b.timing {
		end, err := b.timingRecord(s)
		if err != nil {
			return &dag.OpError{Op: op.Name, Err: err}
		}
		b.timed = append(b.timed, timedOp{op: op.ID, stream: si, dev: s.dev, start: start, end: end})
	}
	return nil
}

// ptr is the device address of view v now.
func (b *Backend) ptr(v dag.View) C.CUdeviceptr {
	return b.bufs[v.Buf.ID].dptr + C.CUdeviceptr(v.Offset)
}

func (b *Backend) hostPtr(v dag.View) unsafe.Pointer {
	return unsafe.Add(b.bufs[v.Buf.ID].host, v.Offset)
}

// run makes the driver call (one cgo call, two for pageable uploads) that
// enqueues st on s.
func (b *Backend) run(s *stream, st *opState) error {
	api, c, h := b.drv.api, s.dev.ctx, s.h
	op := st.op
	switch st.act {
	case actNone:
		return nil
	case actLaunch, actFill64:
		for _, p := range st.slots {
			bs := &b.bufs[p.buf]
			if bs.dptr == 0 {
				return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
			}
			*p.slot = uint64(bs.dptr) + uint64(p.offset)
		}
		return b.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, c, st.launch, h))
	case actAllocDevice:
		bs := &b.bufs[op.Buffer().ID]
		if bs.dptr != 0 {
			return fmt.Errorf("temporary buffer %s is already allocated", bs.b.Name)
		}
		if err := b.drv.check("cuMemAllocAsync", C.dr_alloc_async(api, c, &bs.dptr, C.size_t(bs.b.Size), h)); err != nil {
			bs.dptr = 0
			return err
		}
		b.live.PoolAllocs++
		return nil
	case actFreeDevice:
		bs := &b.bufs[op.Buffer().ID]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		err := b.drv.check("cuMemFreeAsync", C.dr_free_async(api, c, bs.dptr, h))
		if err == nil {
			bs.dptr = 0
			b.live.PoolAllocs--
		}
		return err
	case actFillDevice:
		v := op.Access[0].View
		return b.drv.check("cuMemsetD32Async", C.dr_memset_async(api, c, b.ptr(v), C.int(st.esize), C.uint64_t(st.fill), C.size_t(st.count), h))
	case actHostWork:
		return b.drv.check("cuLaunchHostFunc", C.dr_hostwork_launch(api, c, st.work, h))
	case actHostFunc:
		return b.drv.check("cuLaunchHostFunc", C.dr_hostfunc_launch(api, c, C.uintptr_t(st.handle), h))
	case actGemm:
		return b.runGemm(s, op)
	}
	src, dst := op.Access[0].View, op.Access[1].View
	n := C.size_t(src.Size)
	switch st.act {
	case actCopyDtoD:
		return b.drv.check("cuMemcpyDtoDAsync_v2", C.dr_dtod_async(api, c, b.ptr(dst), b.ptr(src), n, h))
	case actCopyPeer:
		dc, sc := b.bufs[dst.Buf.ID].dev.ctx, b.bufs[src.Buf.ID].dev.ctx
		return b.drv.check("cuMemcpyPeerAsync", C.dr_peer_async(api, c, b.ptr(dst), dc, b.ptr(src), sc, n, h))
	case actCopyHtoD:
		return b.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, b.ptr(dst), b.hostPtr(src), n, h))
	case actCopyHtoDPageable:
		// The driver reads pageable memory when the call is made, not in
		// stream order: wait until the stream has reached this point.
		if err := b.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h)); err != nil {
			return err
		}
		return b.drv.check("cuMemcpyHtoDAsync_v2", C.dr_htod_async(api, c, b.ptr(dst), b.hostPtr(src), n, h))
	case actCopyDtoH:
		// Into pageable memory the call returns once the copy is done.
		return b.drv.check("cuMemcpyDtoHAsync_v2", C.dr_dtoh_async(api, c, b.hostPtr(dst), b.ptr(src), n, h))
	}
	return fmt.Errorf("unknown action %d", st.act)
}

// Sync waits for every stream. With a context that can end it polls, so
// that cancellation returns at once; the work then runs on (a GPU cannot be
// interrupted), host steps not yet started are skipped, and the next run's
// first call, or Close, waits for it.
//
// Errors: a host step's error names its op. A fault that the driver reports
// asynchronously (an illegal address, say) is attributed to the last op run
// on the stream that reported it: the driver says which context failed, not
// which kernel, so the cause may be an earlier op.
func (b *Backend) Sync(ctx context.Context) error {
	var first error
	for i := range b.streams {
		s := &b.streams[i]
		if err := b.syncStream(ctx, s); err != nil {
			if ctx.Err() != nil {
				b.abandon()
				return ctx.Err()
			}
			if first == nil {
				first = &dag.OpError{Op: s.last, Err: &AsyncError{Stream: i, Err: err}}
			}
		}
	}
	b.hostMu.Lock()
	herr := b.hostErr
	b.hostErr = nil
	b.hostMu.Unlock()
	if herr != nil {
		return herr
	}
	return first
}

func (b *Backend) syncStream(ctx context.Context, s *stream) error {
	api, c, h := b.drv.api, s.dev.ctx, s.h
	done := ctx.Done()
	if done == nil {
		return b.drv.check("cuStreamSynchronize", C.dr_stream_sync(api, c, h))
	}
	pause := time.Duration(0)
	for {
		r := C.dr_stream_query(api, c, h)
		if r != codeNotReady {
			return b.drv.check("cuStreamQuery", r)
		}
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		// Spin briefly (short runs end within microseconds), then back off
		// to sleeps of up to a millisecond.
		if pause == 0 {
			for range 64 {
				runtime.Gosched()
				if C.dr_stream_query(api, c, h) != codeNotReady {
					break
				}
			}
			pause = 20 * time.Microsecond
			continue
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// abandon stops host steps that have not started and tells running ones
// through their context.
func (b *Backend) abandon() {
	b.abandoned.Store(true)
	if b.hostCancel != nil {
		b.hostCancel()
	}
}

// resume starts a run after an abandoned one: it waits for the abandoned
// work (whose host steps return at once) and gives host steps a fresh
// context.
func (b *Backend) resume() error {
	for _, d := range b.devs {
		if err := b.drv.ctxSync(d.ctx); err != nil {
			return fmt.Errorf("waiting for the abandoned run: %w", err)
		}
	}
	b.hostCtx, b.hostCancel = context.WithCancel(context.WithoutCancel(b.hostCtx))
	b.abandoned.Store(false)
	return nil
}

// AsyncError is a fault the driver reported for a stream after the ops were
// enqueued.
type AsyncError struct {
	Stream int
	Err    error
}

func (e *AsyncError) Error() string {
	return fmt.Sprintf("%v (reported asynchronously by stream %d after this op, the last on it; an earlier op may have caused it)", e.Err, e.Stream)
}

func (e *AsyncError) Unwrap() error { return e.Err }

// Read returns the contents of a persistent buffer; call it after Sync.
func (b *Backend) Read(buf *dag.Buffer) ([]byte, error) {
	if b.g == nil || buf == nil || buf.ID < 0 || buf.ID >= len(b.bufs) || b.bufs[buf.ID].b != buf {
		return nil, fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return nil, fmt.Errorf("cuda: buffer %q is temporary: it has no contents after a run (make it persistent to read it)", buf.Name)
	}
	bs := &b.bufs[buf.ID]
	out := make([]byte, buf.Size)
	if buf.Placement == dag.Device {
		if err := b.drv.dtoh(bs.dev.ctx, out, bs.dptr); err != nil {
			return nil, fmt.Errorf("reading buffer %q: %w", buf.Name, err)
		}
		return out, nil
	}
	copy(out, unsafe.Slice((*byte)(bs.host), buf.Size))
	return out, nil
}

// Write replaces the contents of persistent buffer buf with data, which
// must be buf's size: a new input between runs or graph replays. Call it
// when the work that uses buf is done (after Sync).
func (b *Backend) Write(buf *dag.Buffer, data []byte) error {
	if b.g == nil || buf == nil || buf.ID < 0 || buf.ID >= len(b.bufs) || b.bufs[buf.ID].b != buf {
		return fmt.Errorf("cuda: buffer %v is not a buffer of the open graph", buf)
	}
	if buf.Temporary {
		return fmt.Errorf("cuda: buffer %q is temporary: it exists only inside a run (write a persistent buffer and copy it in)", buf.Name)
	}
	if int64(len(data)) != buf.Size {
		return fmt.Errorf("cuda: writing %d bytes into buffer %q of %d bytes: write the whole buffer", len(data), buf.Name, buf.Size)
	}
	bs := &b.bufs[buf.ID]
	if buf.Placement == dag.Device {
		if err := b.drv.htod(bs.dev.ctx, bs.dptr, data); err != nil {
			return fmt.Errorf("writing buffer %q: %w", buf.Name, err)
		}
		return nil
	}
	copy(unsafe.Slice((*byte)(bs.host), buf.Size), data)
	return nil
}

// Close waits for the devices to finish, then releases every stream,
// event, module, allocation and context. It reports the first failure but
// releases everything it can.
func (b *Backend) Close() error {
	if b.g == nil {
		return nil
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	b.closeGraphs(keep)
	for _, d := range b.devs {
		keep(b.drv.ctxSync(d.ctx))
	}
	keep(b.closeGemm())
	if b.hostCancel != nil {
		b.hostCancel()
	}
	for i := range b.bufs {
		bs := &b.bufs[i]
		switch {
		case bs.dptr != 0:
			keep(b.drv.memFree(bs.dev.ctx, bs.dptr))
			if bs.b.Temporary {
				b.live.PoolAllocs--
			} else {
				b.live.DeviceAllocs--
			}
		case bs.host != nil && bs.b.Placement == dag.Pinned:
			keep(b.drv.hostFree(bs.dev.ctx, bs.host))
			b.live.PinnedAllocs--
		case bs.host != nil:
			C.free(bs.host)
			b.live.HostAllocs--
		}
	}
	for i := range b.ops {
		st := &b.ops[i]
		if st.launch != nil {
			C.free(unsafe.Pointer(st.launch))
			b.live.HostAllocs--
		}
		if st.work != nil {
			C.free(unsafe.Pointer(st.work))
			b.live.HostAllocs--
		}
		if st.act == actHostFunc && st.handle != 0 {
			st.handle.Delete()
			b.live.Callbacks--
		}
	}
	for _, st := range b.variants {
		b.dropVariant(st)
	}
	b.variants = nil
	for _, s := range b.streams {
		keep(b.drv.streamDestroy(s.dev.ctx, s.h))
		b.live.Streams--
	}
	for _, e := range b.events {
		if e.h != nil {
			keep(b.drv.eventDestroy(e.dev.ctx, e.h))
			b.live.Events--
		}
	}
	b.recycleTiming()
	for _, d := range b.devs {
		for _, e := range d.timingEvents {
			keep(b.drv.eventDestroy(d.ctx, e))
			b.live.Events--
		}
		for _, m := range d.modules {
			keep(b.drv.moduleUnload(d.ctx, m))
			b.live.Modules--
		}
		if d.builtins != nil {
			keep(b.drv.moduleUnload(d.ctx, d.builtins))
			b.live.Modules--
		}
		if d.pool != nil {
			keep(b.drv.poolTrim(d.ctx, d.pool))
		}
		keep(b.drv.releasePrimary(d.info.dev))
		b.live.Contexts--
	}
	b.comp.close()
	b.g, b.devs, b.bufs, b.ops, b.streams, b.events, b.timed = nil, nil, nil, nil, nil, nil, nil
	b.hostCtx, b.hostCancel, b.hostErr = nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("cuda: closing: %w", errors.Join(errs...))
	}
	return nil
}

// timingRecord records a timing event on s, and the device's time origin
// first if this is the run's first op on the device.
func (b *Backend) timingRecord(s *stream) (C.CUevent, error) {
	d := s.dev
	if d.origin == nil {
		o, err := b.timingEvent(d)
		if err != nil {
			return nil, err
		}
		d.origin = o
		if err := b.drv.check("cuEventRecord", C.dr_record(b.drv.api, d.ctx, o, s.h)); err != nil {
			return nil, err
		}
	}
	e, err := b.timingEvent(d)
	if err != nil {
		return nil, err
	}
	return e, b.drv.check("cuEventRecord", C.dr_record(b.drv.api, d.ctx, e, s.h))
}

func (b *Backend) timingEvent(d *device) (C.CUevent, error) {
	if n := len(d.timingEvents); n > 0 {
		e := d.timingEvents[n-1]
		d.timingEvents = d.timingEvents[:n-1]
		return e, nil
	}
	e, err := b.drv.eventCreate(d.ctx, true)
	if err == nil {
		b.live.Events++
	}
	return e, err
}

// Spans calls f with each op run since the last call: its stream and its
// start and end on the device, from the time origin of its device (an
// event recorded before the first op of the run there). Call it after Sync.
// The times are read in one driver crossing per device.
func (b *Backend) Spans(f func(op, stream int, start, end time.Duration)) error {
	var first error
	ms := slices.Grow(b.spanMs[:0], 2*len(b.timed))[:2*len(b.timed)]
	for _, d := range b.devs {
		if d.origin == nil {
			continue
		}
		evs, at := b.spanEvs[:0], b.spanAt[:0]
		for i, t := range b.timed {
			if t.dev == d {
				evs = append(evs, t.start, t.end)
				at = append(at, i)
			}
		}
		dms := slices.Grow(b.spanDevMs[:0], len(evs))[:len(evs)]
		b.spanEvs, b.spanAt, b.spanDevMs = evs, at, dms
		err := b.drv.elapsedMany(d.ctx, d.origin, evs, dms)
		if err != nil && first == nil {
			var ee *eventError
			if errors.As(err, &ee) && ee.index/2 < len(at) {
				err = fmt.Errorf("timing op %q: %w", b.g.Ops[b.timed[at[ee.index/2]].op].Name, err)
			}
			first = err
		}
		for k, i := range at {
			ms[2*i], ms[2*i+1] = dms[2*k], dms[2*k+1]
		}
	}
	b.spanMs = ms
	for i, t := range b.timed {
		start, end := ms[2*i], ms[2*i+1]
		if start != start || end != end { // NaN: not readable
			continue
		}
		f(t.op, t.stream, msDuration(start), msDuration(end))
	}
	b.recycleTiming()
	return first
}

// recycleTiming returns the timing events of the ops timed since the last
// call, and each device's time origin, to their devices' free lists.
func (b *Backend) recycleTiming() {
	for _, t := range b.timed {
		t.dev.timingEvents = append(t.dev.timingEvents, t.start, t.end)
	}
	b.timed = b.timed[:0]
	for _, d := range b.devs {
		if d.origin != nil {
			d.timingEvents = append(d.timingEvents, d.origin)
			d.origin = nil
		}
	}
}

func msDuration(ms float32) time.Duration {
	return time.Duration(float64(ms) * float64(time.Millisecond))
}
