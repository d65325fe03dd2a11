// Package executor runs a planner.Plan on a backend.
//
// # One call, and many runs
//
// Run is the shortest way from a dag.Graph to its results: it opens the
// best backend registered (device.Auto: the GPU's when a driver and a
// device are found, else the CPU's; WithBackend chooses another), plans
// the graph (WithPlan), runs it once, reads every persistent buffer
// and closes the session and the backend. A program registers the backends
// it may use by importing their packages, as database/sql drivers are
// imported.
//
// A Runner repeats a plan, as a program's main loop does: eagerly, or
// replaying a graph captured at the start (GraphAlways) or automatically
// after a few identical eager runs (GraphAuto), with replays launched in
// batches (WithReplayBatch). It keeps the op times of the runs asked for
// (WithTraceRuns), hands every eager run's measures to an observer (a perf
// model: WithObserver), runs the ranks of a world (NewWorldRunner,
// JoinRunner; under GraphAlways their first run is eager), and when its
// context ends returns a Report of the runs that completed.
//
// Errors from closed sessions, graphs, worlds and backends match
// ErrClosed, and calls that would race work in flight match ErrBusy,
// through errors.Is, whichever layer refused the call.
//
// # Backends and sessions
//
// A backend (package cpu, package cuda) is a device runtime: make one with
// cpu.New or cuda.New, keep it as long as the program runs plans, and close
// it at the end. Open opens a plan on it as a Session: the backend's
// device.Session for the plan's graph (kernels found or loaded, persistent
// buffers allocated with their initial contents) and the plan's streams and
// events. Sessions are cheap next to the backend (on CUDA the backend keeps
// the contexts, modules and memory pools; a session makes only its
// buffers, streams and events), and several may be open on one backend at
// once, each used from its own goroutine. Session.Close releases exactly
// what the session made; the backend's Close closes any session left.
//
// # Runs
//
// Session.Run submits the plan's steps in their global order (run an op,
// record an event, wait for one) and then waits for the backend to finish
// them: eager execution, with the plan's concurrency and no host
// synchronisation inside the run. A backend session that takes many steps
// in one call (device.Submitter: the cuda backend's, from one C loop) gets
// them in stretches of 256, unless faults are injected or each step's
// submission is timed (WithSubmitTiming). Runs can repeat; persistent buffers
// carry over from one to the next. Read returns their contents and Write
// loads new ones between runs. A failing op is reported as a *dag.OpError
// naming it; a cancelled context abandons the run promptly. WithTiming
// collects each op's start and end for traces (Session.Spans). Execute
// opens, runs once, reads everything and closes, for one-off runs.
//
// # Graphs
//
// Session.Capture records the plan once as a Graph (a CUDA graph on the
// cuda backend, a frozen schedule on the cpu backend) after refusing, op by
// op, what a graph cannot hold (CheckCapture). Graph.Launch and Graph.Run
// replay it with one call; Graph.Update changes kernel arguments (SetArg)
// or the memory a buffer's ops use (Rebind) between replays by recapturing
// the plan and updating the executable graph in place where the backend
// can.
//
// A session opened WithAutoCapture captures itself: after a few identical
// eager runs Run replays the captured graph instead (AutoGraph gives it,
// to launch replays in batches), where the plan allows; Write reaches the
// replays as it reaches eager runs, and Session.Update changes eager runs
// and the graph alike. RunLog says which runs were replays, or why the
// session stays eager.
//
// # Shapes
//
// OpenShapes runs one program at several shapes, values of its
// parameters, from one object: a ShapeFunc makes each shape's graph
// (spec.Spec.Shape is one), and the Shapes plans, opens and captures each
// shape at its first run, or when it opens for the buckets WithBuckets
// gives, and keeps it ready under an LRU bound (WithKeep). A run picks
// the shape by value; a value between buckets runs on the next larger
// bucket where its parameters are paddable (WithPaddable), and otherwise
// eagerly, ShapeRun.Eager saying why. On a backend that implements
// device.MemorySharer the shapes share one copy of the memory: each
// persistent buffer allocated once at the largest shape opened and used
// smaller, and one arena per memory as large as the largest plan's, not
// their sum. That is safe because a temporary lives inside one run and a
// Shapes runs one shape at a time, which it enforces (device.ErrBusy);
// verify.Shared checks the plans' places in the shared arenas.
//
// # Stream tasks and callers' streams
//
// A stream task (dag.Builder.Task) is an op whose work a user's function
// enqueues (a cuBLAS call, the user's own cgo) on the stream the planner
// chose. The session calls it when it submits the op: in plan order, on
// the submitting goroutine locked to its OS thread, with the op's device
// context current, passing the stream handle, the device and the address
// of each declared view. The function only enqueues on that stream: no
// synchronisation, no allocation of its own, no other stream. The
// addresses hold for the run; a graph's Update (Rebind) calls it again
// with the new ones. Under Capture it is called once, and what it
// enqueued is replayed by every Launch. An error it returns fails the run
// as a *dag.OpError naming the task. On the cpu backend the function
// itself is called, at every run and replay, with the host's stream
// (dag.TaskStream.Host, its views' bytes in Mem), where the task says it
// runs on the CPU (dag.RunsOnCPU); a task that does not is refused when
// the session opens.
//
// A program with streams of its own orders dagrun's work with them through
// events it owns (External): Enqueue submits a run that
// starts after the caller's event After and records the caller's event
// Done when every stream is done, then returns (Sync collects the result);
// RunAfter does both; Graph.LaunchAfter does the same for a replay. The
// device session implements device.ExternalEvents (CUevents on cuda,
// cpu.Event handles on the cpu backend). dagrun never uses the legacy
// default stream.
//
// # Memory, faults and closing
//
// Open refuses a plan that needs more memory than the backend has free
// (CheckMemory, MemoryNeeds: persistent buffers plus the largest live set
// of temporaries, per device and for host memory) with a *MemoryError
// naming the buffers. WithChaos puts seeded pauses before ops and
// WithFailOp makes one op fail, to test plans and callers against slow
// and failing work. Close may be called from another
// goroutine while Run is in flight: the run ends with an error, then the
// device session drains and releases everything.
//
// # For backend writers
//
// The interfaces a backend implements are in package executor/device:
// device.Backend and device.Session, and optionally device.Timer (timing),
// device.Capturer (graphs), device.Writer (Session.Write), device.Joiner
// (collectives across ranks), device.UniqueIDer and device.MemorySharer
// (Shapes). Backends
// import only dag and device: the executor adapts plans to them, never the
// other way round. See package cpu for the reference implementation.
//
// # Ranks
//
// A graph with collectives (dag.AllReduce ...) is one rank's program.
// OpenWorld opens one plan per rank in this process and runs them
// together, each rank's session from its own goroutine (World.Run,
// World.Capture); JoinWorld runs one rank here, meeting the ranks of other
// processes at a TCP rendezvous (comm's Discover reads torchrun's, Slurm's
// and Open MPI's variables). Both compare the ranks' collective sequences
// before anything runs, join each device session to its world
// (device.Joiner: the backend's unique id from rank 0 for NCCL, in-process
// or TCP communicators for the cpu backend), and make the other ranks fail
// at once when one fails. See OpenWorld and docs/ranks.md.
package executor
