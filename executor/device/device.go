// Package device holds the interfaces between the executor and the backends
// that run plans (package cpu, package cuda), the way database/sql/driver
// sits between database/sql and its drivers: the executor is their only
// consumer, and a backend imports this package (and dag) and nothing higher.
//
// The package is the whole contract. Backend and Session are what every
// backend implements; every other interface is a capability a backend
// may offer, which its consumers (the executor, the command line) find by
// a type assertion and do without where it is missing, and which a
// backend asserts at compile time (var _ device.Capturer = (*Session)(nil)):
//
//   - submission: Submitter (many steps in one call)
//   - profiling: Timer, ReplayTimer, TimingSourcer, OpCounter
//   - capture: Capturer; between runs: Writer
//   - memory: Memory, HostBacked (admission), HostPreparer (opening),
//     ArenaUser, HighWaterer (temporaries), MemorySharer (sessions that
//     never run at once)
//   - the machine: Describer, Topologist
//   - worlds: Joiner, UniqueIDer, CollectiveTimeouter
//   - external events: ExternalEvents
//   - fault injection: Delayer, Failer, BodyFailer
//   - loops and branches: Controller; what bodies may hold: BodyChecker
//   - GEMM epilogues a library refused: Unfuser (of a Backend)
//   - kernels launched while the one before them runs: EarlyLauncher
//     (of a Backend)
//
// Package devicetest checks a backend against this contract.
//
// A Backend is a device runtime, opened once and shared: it keeps what is
// costly to make (a CUDA primary context, loaded modules, NVRTC, memory
// pools) from New to Close. A Session is one plan's resources on it: its
// buffers, streams, events and captured graphs. Several sessions may be open
// on one backend at once, each used from its own goroutine.
package device

import (
	"context"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Backend is a device runtime that opens sessions.
type Backend interface {
	// Open starts a session for g: it loads the kernels g launches (a
	// backend caches them across sessions) and allocates g's persistent
	// buffers, filled with their initial contents. It is safe to call from
	// several goroutines at once.
	Open(ctx context.Context, g *dag.Graph) (Session, error)
	// Close releases the backend. Sessions still open are closed first.
	Close() error
}

// Session runs the steps of plans over one graph. Streams and events are
// numbered densely from 0 in the order they are created. Calls come from
// one goroutine at a time; Run, Record and Wait only enqueue work and may
// return before it is done. Errors about one op are *dag.OpError values.
type Session interface {
	// NewStream creates the next stream, on device, with priority (higher first).
	NewStream(device int, priority dag.Priority) error
	// NewEvent creates the next event.
	NewEvent() error
	// Record enqueues a record of event on stream: the event is reached
	// when the work enqueued on stream before it is done. Each record
	// starts a new generation of the event.
	Record(stream, event int) error
	// Wait makes the work enqueued on stream after it wait until event
	// reaches the generation of its latest Record enqueued so far (CUDA's
	// cuStreamWaitEvent semantics); waiting on an event never recorded
	// waits for nothing.
	Wait(stream, event int) error
	// Run enqueues op on stream.
	Run(stream int, op *dag.Op) error
	// Sync waits until all enqueued work is done and reports the first error
	// it raised; an op's failure makes the session skip the work after it
	// that it still can (a device may run the kernels already queued after
	// a failed host step), so a failed run leaves its buffers undefined.
	// When ctx ends first it abandons the work and returns ctx.Err(). Either
	// way nothing is running when Sync returns, and the session takes the
	// next run.
	Sync(ctx context.Context) error
	// Read returns the contents of a persistent buffer; call it after Sync.
	Read(b *dag.Buffer) ([]byte, error)
	// Close releases exactly what this session holds, once the work
	// already queued drains; the calls after it fail. The executor calls it
	// when no other call of the session is in flight (it ends a run in
	// flight through the run's context first), so a backend need not take
	// it from another goroutine during Run or Sync (the cpu backend does).
	Close() error
}

// StepKind is which Session call a Step stands for.
type StepKind uint8

const (
	RunStep    StepKind = iota // Run(Stream, Op)
	RecordStep                 // Record(Stream, Event)
	WaitStep                   // Wait(Stream, Event)
)

// Step is one call of a plan's submission.
type Step struct {
	Kind   StepKind
	Stream int
	Event  int     // RecordStep, WaitStep
	Op     *dag.Op // RunStep
}

// Submitter is implemented by sessions that take many submission steps in
// one call, as Run, Record and Wait would take them one by one (the cuda
// backend enqueues a stretch of plain steps with one crossing into C).
type Submitter interface {
	// Submit enqueues steps in order. It returns how many it enqueued;
	// when that is fewer than len(steps), err is the next step's error, as
	// Run, Record or Wait would have returned it.
	Submit(steps []Step) (int, error)
}

// Timer is implemented by sessions that can time the ops they run.
type Timer interface {
	// SetTiming turns timing on or off; call it before the streams are made.
	SetTiming(on bool)
	// Spans calls f with the start and end of each op run since the last
	// call, measured from a common origin, once the runs are synchronised.
	Spans(f func(op, stream int, start, end time.Duration)) error
}

// LoopCounter is implemented by timing sessions whose spans may time only
// a sample of a loop's iterations (the cuda backend under CUPTI, in eager
// runs): LoopIterations calls f, once the run's spans are read, with how
// many iterations each such loop ran in it; op is the loop's Index.
type LoopCounter interface {
	LoopIterations(f func(op, iterations int))
}

// ReplayTimer is implemented by timing sessions that can tell apart the op
// spans of several graph replays synchronised together (the cpu backend;
// cuda under CUPTI).
type ReplayTimer interface {
	// TimesReplays reports whether ReplaySpans has spans to give now.
	TimesReplays() bool
	// ReplaySpans calls f like Timer.Spans, with replay the backend's
	// number of the LaunchGraph call the op ran in (from 0, counting every
	// launch of the session), -1 for an eager op. An op of -1 in a replay
	// is one timed as a whole graph: its span is the replay's.
	ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error
}

// TimingSource is how a timing session times ops.
type TimingSource string

const (
	TimingAuto   TimingSource = "auto"   // the backend's best: CUPTI where it can, events otherwise
	TimingCUPTI  TimingSource = "cupti"  // CUPTI activity records
	TimingEvents TimingSource = "events" // a pair of events around each op
	// TimingCUPTIGraph times each graph replay as a whole, from CUPTI's
	// graph-level records, and eager ops by events.
	TimingCUPTIGraph TimingSource = "cupti-graph"
)

// TimingSourcer is implemented by sessions that can choose how they time
// ops (the cuda backend).
type TimingSourcer interface {
	// SetTimingSource chooses the source; call it after Timer.SetTiming(true)
	// and before the streams are made. It fails only for a source the
	// backend does not know; one it cannot use now falls back, and
	// TimingSource says why.
	SetTimingSource(src TimingSource) error
	// TimingSource is the source in use, why, and the count of records
	// the source dropped.
	TimingSource() (source TimingSource, why string, dropped uint64)
}

// Controller is implemented by sessions that run loops and branches
// (dag.While, dag.If). Before the first Run of a control op, the executor
// gives the session the op's bodies as planned: body i is the steps of
// op.Bodies()[i], on streams and events of this session that serve that
// body alone (made with NewStream and NewEvent like any other). A body
// begins and ends on its first step's stream, its entry stream: the
// backend makes the entry stream follow the work before the op on the
// op's stream, and the op's stream follow the body's last step on the
// entry stream; the steps fork to the body's other streams and join them
// back themselves. A While runs its body as long as the flag is non-zero
// when read (before each iteration), failing with an error naming the op
// once Control.Max iterations did not clear it; an If runs body 0 when it
// is non-zero, body 1 (if any) when it is zero. Inside a capture the
// session records the op so that replays do the same on the device.
type Controller interface {
	SetBodies(op *dag.Op, bodies [][]Step) error
}

// Capturer is implemented by sessions that can record a plan's submission
// once and replay it (CUDA graphs; the cpu backend's frozen schedules).
// Between BeginCapture and EndCapture, Run, Record and Wait calls are
// recorded, not run. Graphs are numbered by the session.
type Capturer interface {
	// BeginCapture starts recording on stream origin and forks every
	// other stream from it.
	BeginCapture(origin int) error
	// EndCapture joins every stream back into origin and ends the
	// recording; the graph it returns is not launchable yet.
	EndCapture(origin int) (graph int, err error)
	// Instantiate makes a captured graph launchable.
	Instantiate(graph int) error
	// LaunchGraph enqueues one replay of an instantiated graph on stream.
	LaunchGraph(graph, stream int) error
	// UpdateGraph makes instantiated graph do what freshly captured graph
	// fresh does, in place if it can (inPlace), else by instantiating fresh
	// in its place. fresh is used up either way.
	UpdateGraph(graph, fresh int) (inPlace bool, err error)
	// DestroyGraph releases a graph and its executable.
	DestroyGraph(graph int) error
}

// Writer is implemented by sessions that can overwrite a persistent
// buffer between runs.
type Writer interface {
	Write(b *dag.Buffer, data []byte) error
}

// HostWriter is implemented by sessions that can overwrite a persistent
// host buffer while other work runs: the executor calls WriteHost only
// for host buffers that no work in flight uses.
type HostWriter interface {
	WriteHost(b *dag.Buffer, data []byte) error
}

// Delayer is implemented by sessions that can enqueue a pause on a stream
// (fault injection: the executor's chaos option).
type Delayer interface {
	Delay(stream int, d time.Duration) error
}

// Failer is implemented by sessions that can enqueue a failure on a
// stream: when the stream reaches it, the run fails with err attributed to
// op, as if op had failed (fault injection: the executor's fail-op option).
// On CUDA it runs in a host callback, never inside a kernel.
type Failer interface {
	Fail(stream int, op *dag.Op, err error) error
}

// BodyFailer is implemented by sessions that can make an op of a loop's
// or branch's body fail (fault injection: the executor's fail-op option,
// for the ops it does not submit itself): from the call on, whenever an
// eager run reaches op in its body, the run fails with err attributed to
// op instead of running it; replays of captured graphs run it as usual.
type BodyFailer interface {
	FailInBody(op *dag.Op, err error) error
}

// Memory is what a backend can tell of its memory, for admission control
// before a run.
type Memory interface {
	// FreeMemory returns the bytes free and in all on device (a device
	// ordinal), or in host memory when device is HostMemory.
	FreeMemory(device int) (free, total int64, err error)
}

// HostMemory names host memory in Memory.FreeMemory.
const HostMemory = -1

// HostBacked is implemented by backends whose device buffers are host
// memory (the cpu backend): admission counts their needs against
// HostMemory.
type HostBacked interface{ DevicesInHostMemory() bool }

// HostPreparer is implemented by backends that can make a graph's host
// buffers (memory and initial contents) before its devices are ready:
// Open calls PrepareHost once host memory is admitted and before the
// devices' memory is asked for, which is when the CUDA backend creates a
// context, so that the host's work runs beside the driver's. The next
// Open of g takes what was made; release drops it if no Open will.
type HostPreparer interface {
	PrepareHost(g *dag.Graph) (release func())
}

// ArenaUser is implemented by sessions that can place temporaries in
// arenas the plan packed (planner.Plan.Memory) instead of allocating each.
type ArenaUser interface {
	// UseArenas allocates one arena of arenas[m] bytes for each memory m
	// (a device ordinal, plan.PinnedMemory or plan.PageableMemory)
	// and places each temporary buffer b at offsets[b.ID] of its memory's
	// arena; its Alloc and Free ops then do nothing. It is called once,
	// before the session runs anything.
	UseArenas(arenas map[int]int64, offsets []int64) error
}

// MemorySharer is implemented by backends that can open a session over
// memory another of their sessions holds, so that sessions which never run
// at once keep one copy of it: the executor's Shapes, whose shapes of one
// program share their persistent buffers (allocated at the largest shape,
// used smaller) and their temporaries' arenas.
type MemorySharer interface {
	// OpenShared is Open, except that the session takes the memory sh
	// names from owner, an open session of this backend, and allocates
	// and initialises none of it: what owner's buffers hold is what the
	// session's hold. The caller keeps owner open while the session is,
	// and never runs the two, or two sessions sharing owner's memory, at
	// once.
	OpenShared(ctx context.Context, g *dag.Graph, owner Session, sh Shared) (Session, error)
}

// Shared is where a session opened by MemorySharer.OpenShared takes its
// memory from its owner.
type Shared struct {
	// Buffers gives, by buffer ID of the graph opened, the buffer of the
	// owner's graph whose first bytes a persistent buffer uses: of the
	// same placement and device, at least as large. A nil entry, or one
	// past the list, leaves the buffer memory and contents of its own.
	Buffers []*dag.Buffer
	// Offsets places temporaries in the owner's arenas (ArenaUser): each
	// temporary b at Offsets[b.ID] of the owner's arena of its memory,
	// whose Alloc and Free then do nothing. -1, or an entry past the
	// list, leaves b out of the arenas. A backend whose arenas hold only
	// some memories (cuda's, devices only) keeps the others' temporaries
	// as it does without arenas.
	Offsets []int64
}

// HighWaterer is implemented by sessions that measure their temporaries'
// memory.
type HighWaterer interface {
	// MemoryHighWater returns, by memory (a device ordinal,
	// plan.PinnedMemory or plan.PageableMemory), the most bytes the
	// temporaries held at once since the session opened: an arena's size
	// where arenas hold them, else the most allocated and not yet freed at
	// once. A memory it did not measure is absent; nil when it measured
	// none.
	MemoryHighWater() map[int]int64
}

// OpCounter is implemented by sessions that count the ops they have run
// (the cpu backend), from which a long run's progress is drawn.
type OpCounter interface {
	// OpsDone is how many ops the session has run since it opened; it may
	// be called from any goroutine while a run is in flight.
	OpsDone() int64
}

// World is a session's place among the ranks of a program whose
// collectives (dag.AllReduce ...) span several sessions: in one process
// (one session per rank, each from its own goroutine) or one per process.
type World struct {
	Rank, Size int
	// UniqueID is what the backend's UniqueIDer made on rank 0, handed to
	// every rank by the rendezvous (an NCCL unique id on CUDA); nil for
	// backends that need none.
	UniqueID []byte
	// Comm carries the collectives between the ranks for backends with no
	// collective library of their own (the cpu backend): internal/comm's
	// Comm, in one process or over TCP.
	Comm Collectives
}

// Collectives is one rank's end of a world as a backend without a
// collective library uses it. Every rank calls them in the same order.
type Collectives interface {
	Rank() int
	World() int
	AllReduce(ctx context.Context, buf []byte, dt dag.DType, op dag.Reduction) error
	AllGather(ctx context.Context, in, out []byte) error
	ReduceScatter(ctx context.Context, in, out []byte, dt dag.DType, op dag.Reduction) error
	Broadcast(ctx context.Context, buf []byte, root int) error
	Send(ctx context.Context, buf []byte, to int) error
	Recv(ctx context.Context, buf []byte, from int) error
	// Abort makes the other ranks fail at once instead of waiting for this one.
	Abort(cause error)
}

// Joiner is implemented by sessions that run collectives: Join, called
// once after Open and before the streams are made, makes the session
// rank w.Rank of w (on CUDA: ncclCommInitRank, which returns once every
// rank has joined, so the ranks of one process join from their own
// goroutines).
type Joiner interface {
	Join(ctx context.Context, w World) error
}

// CollectiveTimeouter is implemented by sessions whose collectives give up
// on a lost peer after a time of their own (the cuda backend).
type CollectiveTimeouter interface {
	SetCollectiveTimeout(d time.Duration)
}

// UniqueIDer is implemented by backends whose collectives need an id made
// on rank 0 and handed to every rank before they join (NCCL).
type UniqueIDer interface {
	UniqueID() ([]byte, error)
}

// ExternalEvents is implemented by sessions that can order their streams
// with the caller's own work through events the caller made (a CUevent on
// CUDA, a *cpu.Event's handle on the cpu backend): the way a program that
// already has streams composes with dagrun. Neither call is allowed while
// capturing.
type ExternalEvents interface {
	// WaitExternal makes the work enqueued on stream after it wait for the
	// latest record of the caller's event ev enqueued so far.
	WaitExternal(stream int, ev uintptr) error
	// RecordExternal records the caller's event ev on stream: it is
	// reached once the work enqueued on stream before it is done.
	RecordExternal(stream int, ev uintptr) error
}

// Unfuser is implemented by backends whose sessions may run a GEMM's
// epilogue (dag.Epilogue) apart from its product: the cuda backend, where
// cuBLASLt has no algorithm for an epilogue on a GEMM's shape and dtype,
// runs the product and then the builtin kernels that compute the same.
type Unfuser interface {
	// Unfused lists the ops of s, a session of this backend, whose
	// epilogue runs apart, by name. Call it from the goroutine that uses s.
	Unfused(s Session) []Unfused
}

// Unfused is an op whose epilogue runs apart from its product, and why.
type Unfused struct {
	Op       string
	Epilogue string
	Why      string
}

// EarlyLauncher is implemented by backends that can launch a kernel while
// the kernel before it on its stream still runs, the kernel waiting for
// it on the device before it touches memory: CUDA's programmatic
// dependent launch (compute capability 9.0 and later), eagerly and as
// programmatic edges of captured graphs.
type EarlyLauncher interface {
	// LaunchEarly makes the launches of s that early marks (by op ID of
	// its graph, as planner.Plan.Early does) go early in every run and
	// capture after it; call it before the first. It returns how many
	// will, and why the others will not (the driver or the device lacks
	// the means, say); "" when every marked launch goes early.
	LaunchEarly(s Session, early []bool) (n int, why string)
}
