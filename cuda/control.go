package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Loops and branches (dag.While, dag.If) run as CUDA conditional nodes.
// A control op is lowered into whatever graph its stream is capturing
// into: a small kernel of dagrun's reads the flag and sets the node's
// condition; the conditional node follows it; each body is captured into
// the node's body graph from its entry stream, through the body's own
// fork and join steps, and a While's body ends with the kernel that reads
// the flag again (and counts iterations against Control.Max), unless the
// body ends in a set_flag of the loop's own flag (dag.Op.CondSetter):
// that launch then runs last, as a kernel that sets the flag and does the
// condition kernel's work too, one kernel less per iteration. Inside a
// session's capture that graph is the capture's; in an eager run it is a
// graph of the op's own, captured on a private stream at the op's first
// run and launched at each run, so that eager runs and replays run the
// same device code. Under CUPTI (node-level) an empty kernel,
// dr_cond_exit, follows the conditional node, so that the op's span ends
// with its last iteration on the device's clock, from a record of a node
// of the graph itself: CUPTI names the records of a body's nodes by its
// own node ids, which it can get wrong (iterations.go), and a loop timed
// by them alone then ends with its enter kernel.

// condSource is dagrun's kernels that set a conditional node's condition.
// cudaGraphSetConditional is a builtin of the device runtime that the
// driver's JIT resolves: the declaration is all NVRTC needs.
const condSource = `typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

struct dr_loop {
	unsigned long long count;    // iterations of the current run of the loop
	unsigned long long overflow; // 1 once a run reached its max with the flag set
};

// dr_cond_enter sets the condition from the flag, before the node. A
// loop that resumes (the rest of a sampled run, loopsample.go) keeps its
// count, and stays stopped once it reached its max.
extern "C" __global__ void dr_cond_enter(cudaGraphConditionalHandle h, const int* flag, dr_loop* loop, unsigned long long resume) {
	unsigned int go = *flag != 0 ? 1u : 0u;
	if (loop != 0 && !resume) {
		loop->count = 0;
	} else if (loop != 0 && loop->overflow) {
		go = 0;
	}
	cudaGraphSetConditional(h, go);
}

// dr_next ends an iteration of a while whose flag is flag and whose count
// is now n: it sets the condition from the flag, unless max iterations
// are done, or pause (not 0) are: then the loop stops with its flag as it
// is, for a resume to go on. Its callers load the count beside the flag
// or x, before any store (the pointers are __restrict__: dagrun's loop
// state is its own allocation), so that an iteration waits for one trip
// to memory, not two: a while of 1000 iterations around one empty kernel
// ran 0.88-0.96x as long on H200s (scripts/gpu/loopk.cu).
__device__ __forceinline__ void dr_next(cudaGraphConditionalHandle h, int flag, dr_loop* __restrict__ loop,
		unsigned long long n, unsigned long long max, unsigned long long pause) {
	unsigned int go = flag != 0 ? 1u : 0u;
	if (go && max != 0 && n >= max) {
		loop->overflow = 1;
		go = 0;
	} else if (pause != 0 && n >= pause) {
		go = 0;
	}
	cudaGraphSetConditional(h, go);
}

// dr_cond_next ends an iteration of a while: it reads the flag again.
extern "C" __global__ void dr_cond_next(cudaGraphConditionalHandle h, const int* __restrict__ flag, dr_loop* __restrict__ loop,
		unsigned long long max, unsigned long long pause) {
	unsigned long long n = loop->count + 1;
	int f = *flag;
	loop->count = n;
	dr_next(h, f, loop, n, max, pause);
}

// dr_set_flag_cond and dr_set_flag_cond_f64 are set_flag and set_flag_f64
// (builtins.go), with set_flag's arguments first, that end an iteration
// as dr_cond_next does: the body's last kernel sets the condition. One
// thread does the work whatever the launch shape, as set_flag's does.
// Their flag is an i32 buffer and x an f32 or f64 one (Build sees to
// both), and the loop's state is dagrun's own allocation: the three never
// share bytes, as __restrict__ says.
__device__ __forceinline__ bool dr_first_thread() {
	return (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0;
}
extern "C" __global__ void dr_set_flag_cond(int* __restrict__ flag, long long nflag, const float* __restrict__ x, long long nx,
		double threshold, cudaGraphConditionalHandle h, dr_loop* __restrict__ loop, unsigned long long max, unsigned long long pause) {
	if (!dr_first_thread()) {
		return;
	}
	unsigned long long n = loop->count + 1;
	int f = nx > 0 ? (((double)x[0] > threshold) ? 1 : 0) : *flag; // set_flag leaves a flag without x as it is
	loop->count = n;
	if (nx > 0) {
		*flag = f;
	}
	dr_next(h, f, loop, n, max, pause);
}
extern "C" __global__ void dr_set_flag_cond_f64(int* __restrict__ flag, long long nflag, const double* __restrict__ x, long long nx,
		double threshold, cudaGraphConditionalHandle h, dr_loop* __restrict__ loop, unsigned long long max, unsigned long long pause) {
	if (!dr_first_thread()) {
		return;
	}
	unsigned long long n = loop->count + 1;
	int f = nx > 0 ? ((x[0] > threshold) ? 1 : 0) : *flag;
	loop->count = n;
	if (nx > 0) {
		*flag = f;
	}
	dr_next(h, f, loop, n, max, pause);
}

// dr_cond_exit follows a traced loop or branch: its record ends the op's span.
extern "C" __global__ void dr_cond_exit() {}
`

var (
	condEnter     = &dag.Kernel{Name: "dr_cond_enter", Source: dag.CUDAC, Code: condSource}
	condNext      = &dag.Kernel{Name: "dr_cond_next", Source: dag.CUDAC, Code: condSource}
	condSetFlag   = &dag.Kernel{Name: "dr_set_flag_cond", Source: dag.CUDAC, Code: condSource}
	condSetFlag64 = &dag.Kernel{Name: "dr_set_flag_cond_f64", Source: dag.CUDAC, Code: condSource}
	condExit      = &dag.Kernel{Name: "dr_cond_exit", Source: dag.CUDAC, Code: condSource}
)

// condKernels are the kernels of condSource, loaded with each control op.
func condKernels() []*dag.Kernel {
	return []*dag.Kernel{condEnter, condNext, condSetFlag, condSetFlag64, condExit}
}

// setFlagSlots are set_flag's arguments: flag and its count, x and its
// count, threshold. The kernels that also set a condition take the
// handle, the loop's dr_loop, its max and the pause after them.
const setFlagSlots = 5

// loopStateBytes is the size of a loop's dr_loop.
const loopStateBytes = 16

// controller is the session's part that runs control ops.
type controller struct {
	drv  *driver
	g    *dag.Graph
	hold *holdings
	sub  *submitter
	capt *capturer
	tim  *timer

	controls map[int]*control // by the op's slot (opSlot)
	// bodyStreams are the streams that serve bodies alone: a session's
	// capture neither forks nor joins them, since each body captures
	// into its own graph.
	bodyStreams map[int]bool
	building    int // eager graphs being captured now (nested bodies)
	// loops tells CUPTI's spans which loop each body op runs in, so that
	// a body op has a span per iteration (iterations.go).
	loops *loopIndex
}

// control is what the session keeps for one control op.
type control struct {
	op     *dag.Op
	dev    *sessDevice
	bodies [][]device.Step
	state  C.CUdeviceptr // a While's dr_loop; 0 for an If
	enter  *C.dr_launch
	next   *C.dr_launch // While, unless setter
	// setter is the op of the While's body whose launch sets the
	// condition (condSetter), run as setFlag; nil when next does.
	setter  *dag.Op
	setFlag *C.dr_launch
	// exit follows the conditional node where CUPTI traces ops (lower).
	exit *C.dr_launch
	// joins[i] are the streams of body i besides its entry stream, each
	// with an event that joins it back into the entry stream before the
	// body's capture ends: the plan's own joins may be transitive, and
	// a capture must end with every stream joined.
	joins [][]devJoin

	// The eager graph: captured on private at the first eager run, again
	// when an address it holds changed (temporaries from the pool).
	private C.CUstream
	tmpl    C.CUgraph
	exec    C.CUgraphExec
	addrs   []C.CUdeviceptr // the op's accesses' addresses it was captured with
	exited  bool            // ... and whether it ends in exit
	sampling
}

// devJoin is a stream and the event that joins it into another.
type devJoin struct {
	stream int
	ev     C.CUevent
}

// opSlot is where the session keeps op's state: its Index, which numbers
// the ops of bodies after the graph's own; its ID for a graph whose ops
// were not numbered by dag.Builder.Build (Index 0).
func opSlot(op *dag.Op) int { return max(op.ID, op.Index) }

// prepareControl prepares a While or If: the flag's kernels are loaded
// with the session's kernels; the bodies come with SetBodies.
func prepareControl(sm *submitter, st *opState, op *dag.Op) error {
	if C.dr_cond_supported(sm.drv.api) == 0 {
		return fmt.Errorf("cuda: driver %s (CUDA %d) has no conditional graph nodes, which loops and branches need (CUDA 12.4 or newer); update the NVIDIA driver, or run on the cpu backend", sm.drv.path, sm.drv.version)
	}
	if op.Kind.Info().Body == dag.Branch && op.Control.Else != nil && sm.drv.version < 12080 {
		return fmt.Errorf("cuda: driver %s (CUDA %d) has no IF nodes with an else branch (CUDA 12.8 or newer); update the NVIDIA driver, or split the branch into two ifs", sm.drv.path, sm.drv.version)
	}
	st.act = actControl
	return nil
}

// SetBodies does the work of Session.SetBodies.
func (ct *controller) SetBodies(op *dag.Op, bodies [][]device.Step) error {
	if err := unopened(ct.drv); err != nil { // faults.go
		return err
	}
	if op == nil || opSlot(op) >= len(ct.sub.ops) || ct.sub.ops[opSlot(op)].op != op || ct.sub.ops[opSlot(op)].act != actControl {
		return fmt.Errorf("cuda: SetBodies: %v is not a loop or branch of the open graph", op)
	}
	if len(bodies) != len(op.Bodies()) {
		return &dag.OpError{Op: op.Name, Err: fmt.Errorf("cuda: %d bodies given for the %d it has", len(bodies), len(op.Bodies()))}
	}
	d, err := ct.hold.device(op.Device)
	if err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	c := &control{op: op, dev: d, bodies: bodies, setter: ct.condSetter(op, bodies)}
	for _, steps := range bodies {
		if len(steps) == 0 && op.Kind.Info().Body == dag.Loop {
			return &dag.OpError{Op: op.Name, Err: errors.New("cuda: the loop's body has no steps")}
		}
		for _, st := range steps {
			s, err := ct.sub.stream(st.Stream)
			if err != nil {
				return &dag.OpError{Op: op.Name, Err: err}
			}
			if s.dev != d {
				return &dag.OpError{Op: op.Name, Err: fmt.Errorf("cuda: body stream %d is on device %d, not the op's device %d", st.Stream, s.dev.ordinal, d.ordinal)}
			}
		}
	}
	if ct.controls == nil {
		ct.controls, ct.bodyStreams = map[int]*control{}, map[int]bool{}
		ct.loops = newLoopIndex(ct.g)
	}
	if old := ct.controls[opSlot(op)]; old != nil {
		ct.release(old, func(error) {})
		ct.loops.setsCond(old.setter, nil)
	}
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	if err = ct.launches(c); err == nil && op.Kind.Info().Body == dag.Loop {
		if c.state, err = ct.drv.memAlloc(d.ctx, loopStateBytes); err == nil {
			ct.hold.track(&ct.hold.live.DeviceAllocs, 1)
			err = ct.drv.zero(d.ctx, c.state, loopStateBytes)
		}
	}
	if err != nil {
		ct.release(c, keep)
		return &dag.OpError{Op: op.Name, Err: err}
	}
	if err = ct.makeJoins(c); err != nil {
		ct.release(c, func(error) {})
		return &dag.OpError{Op: op.Name, Err: err}
	}
	ct.setArgs(c)
	ct.controls[opSlot(op)] = c
	ct.loops.setsCond(c.setter, op)
	for _, steps := range bodies {
		for _, st := range steps {
			ct.bodyStreams[st.Stream] = true
		}
	}
	return nil
}

// makeJoins makes c's joins.
func (ct *controller) makeJoins(c *control) error {
	c.joins = make([][]devJoin, len(c.bodies))
	for i, steps := range c.bodies {
		if len(steps) == 0 {
			continue
		}
		seen := map[int]bool{steps[0].Stream: true}
		for _, st := range steps {
			if seen[st.Stream] {
				continue
			}
			seen[st.Stream] = true
			ev, err := ct.drv.events.create(c.dev.ctx, false)
			if err != nil {
				return err
			}
			ct.hold.track(&ct.hold.live.Events, 1)
			c.joins[i] = append(c.joins[i], devJoin{stream: st.Stream, ev: ev})
		}
	}
	return nil
}

// launches makes c's kernel launches.
func (ct *controller) launches(c *control) error {
	mk := func(k *dag.Kernel, n int) (*C.dr_launch, error) {
		f, ok := c.dev.funcs[k]
		if !ok {
			return nil, fmt.Errorf("cuda: kernel %s is not loaded on device %d", k.Name, c.dev.ordinal)
		}
		l := C.dr_launch_new(C.int(n))
		if l == nil {
			return nil, errors.New("out of host memory")
		}
		ct.hold.track(&ct.hold.live.HostAllocs, 1)
		l.f = f
		l.gx, l.gy, l.gz, l.bx, l.by, l.bz = 1, 1, 1, 1, 1, 1
		return l, nil
	}
	var err error
	if c.enter, err = mk(condEnter, 4); err != nil {
		return err
	}
	if c.exit, err = mk(condExit, 0); err != nil {
		return err
	}
	switch {
	case c.setter != nil:
		k := condSetFlag
		if c.setter.Launch.Kernel.ElemDType() == dag.F64 {
			k = condSetFlag64
		}
		if c.setFlag, err = mk(k, setFlagSlots+4); err == nil {
			// set_flag's own launch shape, as its launch would have.
			own := ct.sub.ops[opSlot(c.setter)].launch
			l := c.setFlag
			l.gx, l.gy, l.gz, l.bx, l.by, l.bz, l.shared = own.gx, own.gy, own.gz, own.bx, own.by, own.bz, own.shared
		}
	case c.op.Kind.Info().Body == dag.Loop:
		c.next, err = mk(condNext, 5)
	}
	return err
}

// setArgs writes the flag's and the state's addresses and the bound into
// c's launches; the handle is written at each lowering.
func (ct *controller) setArgs(c *control) {
	flag := ct.hold.ptr(c.op.Control.Cond)
	for _, l := range []*C.dr_launch{c.enter, c.next} {
		if l == nil {
			continue
		}
		slots := unsafe.Slice(l.slots, l.nslots)
		slots[1], slots[2] = C.uint64_t(flag), C.uint64_t(c.state)
		if l == c.next {
			slots[3] = C.uint64_t(c.op.Control.Max)
		}
	}
	if c.setFlag != nil {
		slots := unsafe.Slice(c.setFlag.slots, c.setFlag.nslots)
		slots[setFlagSlots+1], slots[setFlagSlots+2] = C.uint64_t(c.state), C.uint64_t(c.op.Control.Max)
	}
}

// run runs control op op on stream s: lowered into the graph s is
// capturing into, or as its eager graph.
func (ct *controller) run(s *stream, op *dag.Op) error {
	c := ct.controls[opSlot(op)]
	if c == nil {
		return errors.New("cuda: the loop's bodies were never given (SetBodies)")
	}
	if ct.capt.capture != nil || ct.building > 0 {
		return ct.lower(s.h, c)
	}
	if err := ct.eagerGraph(c); err != nil {
		return err
	}
	if c.rest != nil {
		return ct.runSampled(s, c)
	}
	return ct.drv.check("cuGraphLaunch", C.dr_graph_launch(ct.drv.api, c.dev.ctx, c.exec, s.h))
}

// eagerGraph makes c's eager graph, or makes it again when an address it
// holds has changed; a sampled loop's two (loopsample.go).
func (ct *controller) eagerGraph(c *control) error {
	addrs := make([]C.CUdeviceptr, 0, len(c.op.Access))
	for _, a := range c.op.Access {
		addrs = append(addrs, ct.hold.ptr(a.View))
	}
	sample := ct.samples(c)
	if c.exec != nil && slices.Equal(addrs, c.addrs) && c.exited == ct.exits() && (c.rest != nil) == sample {
		return nil
	}
	ct.dropEager(c, func(error) {})
	if c.private == nil {
		h, err := ct.drv.streams.create(c.dev.ctx, 0)
		if err != nil {
			return err
		}
		c.private = h
		ct.hold.track(&ct.hold.live.Streams, 1)
	}
	var err error
	if sample {
		err = ct.captureEager(c, roleSample, &c.tmpl, &c.exec)
		if err == nil {
			err = ct.captureEager(c, roleRest, &c.restTmpl, &c.rest)
		}
	} else {
		err = ct.captureEager(c, roleWhole, &c.tmpl, &c.exec)
	}
	if err != nil {
		ct.dropEager(c, func(error) {})
		return err
	}
	c.addrs, c.exited = addrs, ct.exits()
	return nil
}

// captureEager captures c's op as role says on c's private stream into
// *tmpl and instantiates it into *exec; what it made is set there even
// when it fails, for dropEager.
func (ct *controller) captureEager(c *control, role sampleRole, tmpl *C.CUgraph, exec *C.CUgraphExec) error {
	api, ctx := ct.drv.api, c.dev.ctx
	if err := ct.drv.check("cuStreamBeginCapture_v2", C.dr_capture_begin(api, ctx, c.private)); err != nil {
		return err
	}
	ct.building++
	c.role = role
	lowerErr := ct.lower(c.private, c)
	c.role = roleWhole
	ct.building--
	var g C.CUgraph
	endErr := ct.drv.check("cuStreamEndCapture", C.dr_capture_end(api, ctx, c.private, &g))
	if g != nil {
		*tmpl = g
		ct.hold.track(&ct.hold.live.Graphs, 1)
	}
	if err := errors.Join(lowerErr, endErr); err != nil {
		return err
	}
	var e C.CUgraphExec // a local: cgo checks the whole object a pointer into c points to
	if err := ct.drv.check("cuGraphInstantiateWithFlags", C.dr_graph_instantiate(api, ctx, &e, g, c.private)); err != nil {
		return err
	}
	*exec = e
	return nil
}

// exits reports whether a lowered control op ends in dr_cond_exit: where
// CUPTI traces ops, whose records then bound the op's span.
func (ct *controller) exits() bool { return ct.tim.tracesOps() }

// lower adds c's op to the graph cs is capturing into.
func (ct *controller) lower(cs C.CUstream, c *control) (err error) {
	api, ctx := ct.drv.api, c.dev.ctx
	var h C.uint64_t
	if err := ct.drv.check("cuGraphConditionalHandleCreate", C.dr_cond_handle(api, ctx, cs, &h)); err != nil {
		return err
	}
	for _, l := range []*C.dr_launch{c.enter, c.next} {
		if l != nil {
			unsafe.Slice(l.slots, l.nslots)[0] = h
		}
	}
	if c.setFlag != nil {
		unsafe.Slice(c.setFlag.slots, c.setFlag.nslots)[setFlagSlots] = h
	}
	ct.setArgs(c) // a temporary flag's address is the one of now
	c.role.setArgs(c)
	if err := ct.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, ctx, c.enter, cs)); err != nil {
		return err
	}
	typ, size := C.int(0), C.int(len(c.bodies))
	if c.op.Kind.Info().Body == dag.Loop {
		typ = 1
	}
	var bodies [2]C.CUgraph
	if err := ct.drv.check("cuGraphAddNode", C.dr_cond_node(api, ctx, cs, h, typ, size, &bodies[0])); err != nil {
		return err
	}
	// Timing events have no place inside a body; CUPTI names the body's
	// nodes by their ops (runTraced pushes each), and its records of the
	// loop's own kernels bound the iterations (iterations.go).
	timing := ct.tim.timing
	ct.tim.timing = false
	ct.building++
	defer func() { ct.tim.timing = timing; ct.building-- }()
	for i, steps := range c.bodies {
		if len(steps) == 0 {
			continue // a branch that does nothing: its body graph stays empty
		}
		entry := &ct.sub.streams[steps[0].Stream]
		if err := ct.drv.check("cuStreamBeginCaptureToGraph", C.dr_capture_to_graph(api, ctx, entry.h, bodies[i])); err != nil {
			return err
		}
		bodyErr := ct.submit(steps, c.setter)
		for _, j := range c.joins[i] {
			if bodyErr == nil {
				bodyErr = ct.drv.check("cuEventRecord", C.dr_record(api, ctx, j.ev, ct.sub.streams[j.stream].h))
			}
			if bodyErr == nil {
				bodyErr = ct.drv.check("cuStreamWaitEvent", C.dr_wait(api, ctx, entry.h, j.ev))
			}
		}
		switch {
		case bodyErr != nil:
		case c.setter != nil:
			// Last, after every stream of the body joined: nothing in
			// the body follows it (dag.Op.CondSetter).
			bodyErr = ct.runSetter(steps[0].Stream, c)
		case c.next != nil:
			bodyErr = ct.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, ctx, c.next, entry.h))
		}
		var g C.CUgraph
		endErr := ct.drv.check("cuStreamEndCapture", C.dr_capture_end(api, ctx, entry.h, &g))
		if err := errors.Join(bodyErr, endErr); err != nil {
			return fmt.Errorf("body %d: %w", i, err)
		}
	}
	if !ct.exits() || c.role != roleWhole {
		return nil // a sampled run launches exit after its rest (runSampled)
	}
	// After the node, on the stream that captured it: a node of this
	// graph, named by the op pushed now, not a body's.
	return ct.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, ctx, c.exit, cs))
}

// submit enqueues a body's steps, but for the run of skip (the loop's
// setter, which lower runs last).
func (ct *controller) submit(steps []device.Step, skip *dag.Op) error {
	sm := ct.sub
	for _, st := range steps {
		var err error
		switch st.Kind {
		case device.RunStep:
			if skip != nil && st.Op == skip {
				continue
			}
			err = sm.Run(st.Stream, st.Op)
		case device.RecordStep:
			err = sm.Record(st.Stream, st.Event)
		case device.WaitStep:
			err = sm.Wait(st.Stream, st.Event)
		default:
			err = fmt.Errorf("cuda: body step of kind %d", st.Kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// overflowed reports the loops whose last run reached their max with the
// flag still set, and clears their mark; it counts the iterations of a
// sampled run (loopsample.go). Called once the streams are synchronised.
func (ct *controller) overflowed() error {
	var errs []error
	var st [loopStateBytes]byte
	for _, c := range ct.controls {
		if c.state == 0 || c.op.Control.Max == 0 && !c.sampled {
			continue
		}
		if err := ct.drv.dtoh(c.dev.ctx, st[:], c.state); err != nil {
			errs = append(errs, &dag.OpError{Op: c.op.Name, Err: err})
			continue
		}
		c.count(binary.LittleEndian.Uint64(st[:8]))
		if c.op.Control.Max == 0 || binary.LittleEndian.Uint64(st[8:]) == 0 {
			continue
		}
		errs = append(errs, &dag.OpError{Op: c.op.Name, Err: c.op.Control.MaxReached()})
		if err := ct.drv.zero(c.dev.ctx, c.state, loopStateBytes); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropEager releases c's eager graph.
func (ct *controller) dropEager(c *control, keep func(error)) {
	api, ctx := ct.drv.api, c.dev.ctx
	if c.exec != nil {
		keep(ct.drv.check("cuGraphExecDestroy", C.dr_graph_exec_destroy(api, ctx, c.exec)))
		c.exec = nil
	}
	if c.rest != nil {
		keep(ct.drv.check("cuGraphExecDestroy", C.dr_graph_exec_destroy(api, ctx, c.rest)))
		c.rest = nil
	}
	for _, g := range []*C.CUgraph{&c.tmpl, &c.restTmpl} {
		if *g != nil {
			keep(ct.drv.check("cuGraphDestroy", C.dr_graph_destroy(api, ctx, *g)))
			*g = nil
			ct.hold.track(&ct.hold.live.Graphs, -1)
		}
	}
	c.addrs = nil
}

// release frees everything c holds.
func (ct *controller) release(c *control, keep func(error)) {
	ct.dropEager(c, keep)
	if c.private != nil {
		keep(ct.drv.streams.destroy(c.dev.ctx, c.private))
		c.private = nil
		ct.hold.track(&ct.hold.live.Streams, -1)
	}
	if c.state != 0 {
		keep(ct.drv.memFree(c.dev.ctx, c.state))
		c.state = 0
		ct.hold.track(&ct.hold.live.DeviceAllocs, -1)
	}
	for _, js := range c.joins {
		for _, j := range js {
			keep(ct.drv.events.destroy(c.dev.ctx, j.ev))
			ct.hold.track(&ct.hold.live.Events, -1)
		}
	}
	c.joins = nil
	for _, l := range []**C.dr_launch{&c.enter, &c.next, &c.setFlag, &c.exit} {
		if *l != nil {
			C.free(unsafe.Pointer(*l))
			*l = nil
			ct.hold.track(&ct.hold.live.HostAllocs, -1)
		}
	}
}

// close releases every control's resources (Close, after the streams are
// idle).
func (ct *controller) close(keep func(error)) {
	for _, c := range ct.controls {
		ct.release(c, keep)
	}
	ct.controls, ct.bodyStreams = nil, nil
}
