package plan

import (
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// StreamKind is the work a stream is reserved for.
type StreamKind uint8

const (
	Compute    StreamKind = iota // kernels, fills, allocs, frees, host steps
	CopyH2D                      // copies from host to device memory
	CopyD2H                      // copies from device to host memory
	CopyD2D                      // copies within or between devices, and host to host
	CopyAny                      // copies in every direction (Options.SharedCopyStreams)
	Collective                   // collectives, one stream per device and priority

	numStreamKinds // keep last
)

var streamKindNames = [numStreamKinds]string{Compute: "compute", CopyH2D: "h2d", CopyD2H: "d2h", CopyD2D: "d2d", CopyAny: "copy", Collective: "coll"}

// StreamKinds lists every kind of stream, in order.
func StreamKinds() []StreamKind {
	ks := make([]StreamKind, numStreamKinds)
	for i := range ks {
		ks[i] = StreamKind(i)
	}
	return ks
}

func (k StreamKind) String() string {
	if int(k) < len(streamKindNames) {
		return streamKindNames[k]
	}
	return fmt.Sprintf("StreamKind(%d)", uint8(k))
}

// Stream is one in-order queue of a plan.
type Stream struct {
	ID       int
	Device   int
	Priority dag.Priority
	Kind     StreamKind
	Name     string // for people: "dev0.high.compute1"
}

// StepKind is what a step of a plan does.
type StepKind uint8

const (
	Run    StepKind = iota // run Op on Stream
	Record                 // record Event on Stream
	Wait                   // make Stream wait for Event
)

var stepKindNames = [...]string{Run: "run", Record: "record", Wait: "wait"}

func (k StepKind) String() string {
	if int(k) < len(stepKindNames) {
		return stepKindNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// Step is one instruction of a plan.
type Step struct {
	Kind   StepKind
	Stream int32
	Op     int32 // Run: the op's ID in the graph; Record: the op it follows; Wait: the op it precedes
	Event  int32 // Record, Wait: the event's number; Run: -1
}

// Plan is a graph scheduled onto streams: one global submission order of
// steps in which every Record precedes the Waits on its event, and each
// stream's steps, taken in that order, are its instruction list. Each event
// is recorded exactly once.
type Plan struct {
	Graph    *dag.Graph
	Streams  []Stream
	Steps    []Step
	Events   int     // events are numbered 0..Events-1
	OpStream []int32 // the stream of each op, by op ID
	Stats    Stats
	Topology Topology // Options.Topology: how copies between devices go; nil: unknown
	SMs      int      // Options.SMs: multiprocessors per device, for the ops that fill one (perf.Fills); 0: DefaultSMs

	// Memory is what the plan needs of each memory and where its
	// temporaries go in their arenas (MemoryOf); New sets it.
	Memory *Memory
	// Budget is what meeting the memory budgets cost (planner.MemoryBudget); nil
	// when the plan met it without help, or had none.
	Budget *Budget

	// Bodies are the plans of the bodies of the graph's loops and
	// branches, by the control op's ID: Bodies[id][i] plans
	// Graph.Ops[id].Bodies()[i]. A body's plan has streams of its own,
	// Streams[0] being its entry stream: its steps begin by forking the
	// other streams from the entry stream and end by joining them back
	// into it (Record and Wait steps whose Op is -1), so that the body
	// starts after the control op's dependencies, as one op would, and
	// the control op ends after the body. Its events are its own too:
	// the fork's and the joins' come after those of its ops. Its streams
	// are named after the control op ("refine/dev0.normal.compute0",
	// "pick/else/..."), and its own loops and branches have their plans
	// in its Bodies. Nil when the graph has no control ops.
	Bodies map[int][]*Plan

	// Passes are what each pass of the planning did and cost, in the
	// order they ran (a body's plan has its own).
	Passes []PassRecord

	// Declared is the graph as given to the planner, where a rewrite
	// pass (fuse) changed it: Graph is then the rewritten one. Parts[i]
	// are the IDs in Declared of the ops that op i of Graph runs, in
	// order: one for an op as declared, a gemm and the launches fused
	// into it for a fused op. Both are nil when Graph is the declared
	// graph.
	Declared *dag.Graph
	Parts    [][]int32

	// Early marks, by op ID, the kernel launches that go early: launched
	// while the kernel before them on their stream still runs, waiting for
	// it on the device (CUDA's programmatic dependent launch; the early
	// pass decides). Nil when none does. A backend without the means runs
	// them as any other launch.
	Early []bool
}

// EarlyOps counts the ops of Early: the edges launched early.
func (p *Plan) EarlyOps() int {
	n := 0
	for _, e := range p.Early {
		if e {
			n++
		}
	}
	return n
}

// IsEarly reports whether op id is launched early (Early).
func (p *Plan) IsEarly(id int) bool { return id >= 0 && id < len(p.Early) && p.Early[id] }

// Stats are the figures every plan reports.
type Stats struct {
	Ops          int
	Streams      int
	CrossEdges   int           // dependencies between ops on different streams
	Waits        int           // waits inserted; CrossEdges minus Waits were implied by earlier waits or stream order
	Makespan     time.Duration // estimated by Simulate under the cost model, for a run of Mode
	CriticalPath time.Duration // the longest chain of dependencies under the cost model: no plan can beat it
	Mode         Mode          // the kind of run Makespan is estimated for
	Strategy     Strategy      // the strategy that placed the ops (for ListScheduling and Best: the one whose plan was kept)
}
