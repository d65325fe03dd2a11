package dag

import "fmt"

// StreamClass is the kind of stream an op belongs on.
type StreamClass uint8

const (
	ComputeClass    StreamClass = iota // kernels, fills, allocs, frees, host steps
	CopyClass                          // transfers: a stream per direction by default
	CollectiveClass                    // collectives and send/recv: a stream of their own per device
)

func (c StreamClass) String() string {
	switch c {
	case ComputeClass:
		return "compute"
	case CopyClass:
		return "copy"
	case CollectiveClass:
		return "collective"
	}
	return fmt.Sprintf("StreamClass(%d)", uint8(c))
}

// Lifetime is what an op kind does to the lifetime of the temporary buffer
// it names.
type Lifetime uint8

const (
	NoLifetime Lifetime = iota // the kind uses buffers, it does not make or end them
	Allocates                  // the kind allocates its temporary (Alloc)
	Frees                      // the kind frees its temporary (Free)
)

// BodyKind is what a control-flow kind does with its bodies.
type BodyKind uint8

const (
	NoBody BodyKind = iota // the kind holds no body
	Loop                   // it runs its body while its flag is set (While)
	Branch                 // it runs the body its flag picks (If)
)

// KindInfo are the facts of an op kind that hold whatever runs it. Its
// unexported fields are this package's behaviour for the kind; every
// other layer keeps its own table keyed by OpKind.
type KindInfo struct {
	Name  string      // as written in specs and op names
	Class StreamClass // the streams it runs on
	// Accesses is the exact number of accesses the kind takes, or -1 when
	// the op says (a launch's parameters, a host step's views).
	Accesses int
	// Lifetime marks the kinds that allocate or free a temporary buffer.
	Lifetime Lifetime
	// Ordered marks the kinds whose relative order is part of the program:
	// every rank of a world must issue them in the order the spec declares
	// them (NCCL deadlocks otherwise), so a planner may move other ops
	// around them but never reorder two Ordered ops. Build also chains each
	// Ordered op after the previous one (see Graph.Ordered).
	Ordered bool
	// PointToPoint marks the collectives that name a peer rank (send,
	// recv): their parameters differ by rank by design, so they are paired
	// per peer when they run rather than compared across ranks.
	PointToPoint bool
	// Body is what a control-flow kind does with the bodies it holds
	// (ControlSpec): repeat one while its flag is set, or pick one by it.
	Body BodyKind

	check  kindCheck                // Build's checks particular to the kind
	bytes  func(o *Op) int64        // Op.Bytes; nil: the sum of the accesses
	kernel func(o *Op) *Kernel      // Op.Kernel; nil: the kind launches none
	world  func(*Op, int, failFunc) // collectives: Graph.CheckWorld's checks
	sign   func(o *Op) string       // collectives: the tail of CollectiveSignature
}

// failFunc reports one problem of an op: the field it is about (or ""), a
// hint, and the message.
type failFunc func(field, hint, format string, a ...any)

// kindCheck checks what is particular to one op kind. It runs after the
// checks every op gets, on ops whose accesses are views of this graph's
// buffers within their bounds.
type kindCheck func(c *checker, o *Op)

// kindTable is this package's one table of op kinds; TestKindTable fails
// when a kind lacks an entry. It is filled by init, because its functions
// name kinds (through OpKind.String), which reads the table.
var kindTable [numOpKinds]KindInfo

func init() {
	kindTable = [numOpKinds]KindInfo{
		Alloc: {Name: "alloc", Class: ComputeClass, Accesses: 1, Lifetime: Allocates,
			check: checkLifetimeOp, bytes: accessSize(0)},
		Free: {Name: "free", Class: ComputeClass, Accesses: 1, Lifetime: Frees,
			check: checkLifetimeOp, bytes: accessSize(0)},
		Copy: {Name: "copy", Class: CopyClass, Accesses: 2,
			check: checkCopy, bytes: accessSize(1)},
		Fill: {Name: "fill", Class: ComputeClass, Accesses: 1,
			check: checkFill, bytes: accessSize(0)},
		Launch: {Name: "launch", Class: ComputeClass, Accesses: -1,
			check: (*checker).launch, kernel: launchKernel},
		Host: {Name: "host", Class: ComputeClass, Accesses: -1,
			check: checkHost},
		Gemm: {Name: "gemm", Class: ComputeClass, Accesses: -1,
			check: func(c *checker, o *Op) { checkGemm(o, c.failer(o)) }},

		AllReduce: {Name: "all_reduce", Class: CollectiveClass, Accesses: 1, Ordered: true,
			check: collectiveCheck(nil, reductionParam), sign: reductionSign},
		AllGather: {Name: "all_gather", Class: CollectiveClass, Accesses: 2, Ordered: true,
			check: collectiveCheck(gatherSizes, nil), world: gatherWorld},
		ReduceScatter: {Name: "reduce_scatter", Class: CollectiveClass, Accesses: 2, Ordered: true,
			check: collectiveCheck(scatterSizes, reductionParam), world: scatterWorld, sign: reductionSign},
		Broadcast: {Name: "broadcast", Class: CollectiveClass, Accesses: 1, Ordered: true,
			check: collectiveCheck(nil, rootParam), world: rootWorld, sign: rootSign},
		Send: {Name: "send", Class: CollectiveClass, Accesses: 1, Ordered: true, PointToPoint: true,
			check: collectiveCheck(nil, peerParam("to")), world: peerWorld("to"), sign: peerSign("to")},
		Recv: {Name: "recv", Class: CollectiveClass, Accesses: 1, Ordered: true, PointToPoint: true,
			check: collectiveCheck(nil, peerParam("from")), world: peerWorld("from"), sign: peerSign("from")},

		Task: {Name: "task", Class: ComputeClass, Accesses: -1,
			check: checkTask},

		Memset2D: {Name: "memset2d", Class: ComputeClass, Accesses: 1,
			check: checkMemset2D, bytes: memset2DBytes},

		While: {Name: "while", Class: ComputeClass, Accesses: -1, Body: Loop,
			check: checkControl, bytes: accessSize(0)},
		If: {Name: "if", Class: ComputeClass, Accesses: -1, Body: Branch,
			check: checkControl, bytes: accessSize(0)},
	}
}

// accessSize is the size of the op's i-th access, as Op.Bytes.
func accessSize(i int) func(o *Op) int64 {
	return func(o *Op) int64 {
		if len(o.Access) <= i {
			return 0
		}
		return o.Access[i].Size
	}
}

func launchKernel(o *Op) *Kernel {
	if o.Launch == nil {
		return nil
	}
	return o.Launch.Kernel
}
