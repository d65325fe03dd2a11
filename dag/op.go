package dag

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
)

// OpKind is what an operation does. Each kind's intrinsic facts are in
// one table (see KindInfo); every other layer keeps its own table keyed by
// OpKind and tests that it covers OpKinds().
type OpKind uint8

const (
	Alloc  OpKind = iota // allocate a temporary buffer (stream-ordered)
	Free                 // free a temporary buffer (stream-ordered)
	Copy                 // copy Access[0] (read) to Access[1] (write)
	Fill                 // set every element of Access[0] to FillValue
	Launch               // run a kernel
	Host                 // run a host function on host memory
	Gemm                 // a matrix product, D = alpha op(A) op(B) + beta C (see GemmSpec)

	// Collectives (see collective.go): every rank of a world issues them in
	// the same order.
	AllReduce     // reduce Access[0] across ranks, in place
	AllGather     // gather Access[0] (read) of every rank into Access[1] (write)
	ReduceScatter // reduce Access[0] (read) across ranks; this rank's block into Access[1]
	Broadcast     // copy the root rank's Access[0] into every other rank's
	Send          // send Access[0] (read) to the peer rank
	Recv          // receive Access[0] (write) from the peer rank

	Task // a user's function enqueues the work on the op's stream (see task.go)

	Memset2D // set a strided 2-D region of Access[0] to FillValue (see Memset2DSpec)

	// Control flow (see control.go): Access[0] reads the flag, the rest
	// are the accesses of the body.
	While // run Control.Body while the flag is non-zero
	If    // run Control.Body if the flag is non-zero, else Control.Else

	numOpKinds // keep last
)

// OpKinds lists every op kind, in order.
func OpKinds() []OpKind {
	ks := make([]OpKind, numOpKinds)
	for i := range ks {
		ks[i] = OpKind(i)
	}
	return ks
}

// Valid reports whether k is a kind this package defines.
func (k OpKind) Valid() bool { return k < numOpKinds }

// Info returns the facts of kind k; the zero KindInfo for an invalid kind.
func (k OpKind) Info() KindInfo {
	if !k.Valid() {
		return KindInfo{}
	}
	return kindTable[k]
}

func (k OpKind) String() string {
	if k.Valid() {
		return kindTable[k].Name
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Priority orders work that competes for a device: higher runs first. A
// Priority is an OpOption: b.Fill(x.All(), 0, dag.High).
type Priority int

const (
	Low    Priority = -1 // behind normal work
	Normal Priority = 0  // the default
	High   Priority = 1  // ahead of normal work
)

// MinPriority and MaxPriority bound the priorities Build takes. A device
// has a few levels (six on an H100) that priorities map onto in order,
// so a priority far outside them is a mistake, not a finer order.
const (
	MinPriority Priority = -16
	MaxPriority Priority = 16
)

func (p Priority) String() string {
	switch p {
	case Low:
		return "low"
	case Normal:
		return "normal"
	case High:
		return "high"
	}
	return fmt.Sprintf("%d", int(p))
}

// Dim3 is a CUDA grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Count is the number of threads or blocks the shape holds: 0 when a
// dimension is below 1, math.MaxInt when the product does not fit.
func (d Dim3) Count() int {
	if d.X < 1 || d.Y < 1 || d.Z < 1 {
		return 0
	}
	n, ok := mulInt64(int64(d.X), int64(d.Y), int64(d.Z))
	if !ok || n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

func (d Dim3) String() string { return string(d.Append(make([]byte, 0, 16))) }

// Append appends d.String() to b.
func (d Dim3) Append(b []byte) []byte {
	b = strconv.AppendInt(b, int64(d.X), 10)
	b = append(b, 'x')
	b = strconv.AppendInt(b, int64(d.Y), 10)
	b = append(b, 'x')
	return strconv.AppendInt(b, int64(d.Z), 10)
}

// Arg is one argument of a kernel launch: a buffer (the index of one of the
// op's accesses) or a scalar. Which field counts is fixed by the parameter.
type Arg struct {
	Access int // index into Op.Access for buffer parameters, -1 for scalars
	Int    int64
	Float  float64
}

// LaunchSpec is the kernel-specific part of a Launch operation.
type LaunchSpec struct {
	Kernel *Kernel
	Grid   Dim3
	Block  Dim3
	Shared int // dynamic shared memory in bytes
	Args   []Arg
	// Early says the kernel waits for the kernel before it on its stream
	// (griddepcontrol.wait) before it touches memory, so that a device
	// that can (CUDA's programmatic dependent launch, compute capability
	// 9.0 and later) may launch it while that kernel still runs. Builtin
	// kernels always do; the planner decides where it pays.
	Early bool
}

// HostFunc is the body of a host step. mem[i] holds the bytes of the step's
// i-th access; it must not keep them after it returns. It must not call into
// a device runtime: on CUDA it runs inside a stream callback.
type HostFunc func(ctx context.Context, mem [][]byte) error

// Op is one operation of a graph.
type Op struct {
	ID int // index in Graph.Ops, a topological order
	// Index numbers the op in the whole graph, the bodies of its loops
	// and branches included, for what runs and traces ops by number: ID
	// for the graph's own ops, len(Graph.Ops)+i for Graph.Nested[i].
	Index    int
	Name     string
	Kind     OpKind
	Access   []Access
	Priority Priority
	Device   int
	Cost     time.Duration // estimated duration; zero lets the planner's cost model decide

	FillValue float64     // Fill: the element value, in the buffer's DType
	Launch    *LaunchSpec // Launch
	HostFunc  HostFunc    // Host
	Gemm      *GemmSpec   // Gemm
	// Collective holds the reduction, root or peer of a collective kind.
	Collective *CollectiveSpec
	Task       *TaskSpec     // Task
	Memset2D   *Memset2DSpec // Memset2D
	Control    *ControlSpec  // While, If

	// Deps are the IDs of the operations this one must follow: inferred from
	// data, explicit After and the declared order of Ordered kinds, without
	// duplicates, each smaller than ID.
	Deps []int32

	more *opMore // what few ops have; nil for the rest
	decl int32   // declaration position, for ErrorList's order; an int32 that packs with the flags
	// Set by Build's checks: the accesses cannot be used for inference, or
	// the after list names ops of no graph.
	badAccess, badAfter bool
}

// opMore is what few ops have: explicit after edges, and problems of their
// declaration that Build reports. It is apart so that an op, which every
// rewrite of a graph copies, stays small; copies share it, and nothing
// changes it once the op is built.
type opMore struct {
	after    []*Op
	argErrs  []*ArgTypeError // Launch arguments of no usable type
	nameErrs []*Error        // Call's names that match no parameter, or parameters it left out
	optErrs  []*Error        // options given to an op of a kind they are not for
}

// extra is o.more, made when o first needs it.
func (o *Op) extra() *opMore {
	if o.more == nil {
		o.more = &opMore{}
	}
	return o.more
}

// extras is what o.more holds, for reading.
func (o *Op) extras() opMore {
	if o.more == nil {
		return opMore{}
	}
	return *o.more
}

func (o *Op) String() string { return o.Name }

// Buffer is the buffer an Alloc or Free works on, else the first access's.
func (o *Op) Buffer() *Buffer {
	if len(o.Access) == 0 {
		return nil
	}
	return o.Access[0].Buf
}

// Bytes is the number of bytes the op moves or touches: for copies the
// destination's size, for fills, allocs and frees their view's, for 2-D
// memsets the region's elements; otherwise the sum of its accesses
// (saturated at math.MaxInt64, never wrapped).
func (o *Op) Bytes() int64 {
	if o.Kind.Valid() && kindTable[o.Kind].bytes != nil {
		return kindTable[o.Kind].bytes(o)
	}
	var n int64
	for _, a := range o.Access {
		n = AddSat(n, max(a.Size, 0))
	}
	return n
}

// Kernel is the kernel the op launches, or nil for kinds that launch none
// (or a launch that names no kernel).
func (o *Op) Kernel() *Kernel {
	if o.Kind.Valid() && kindTable[o.Kind].kernel != nil {
		return kindTable[o.Kind].kernel(o)
	}
	return nil
}
