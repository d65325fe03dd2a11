// Package cuda runs dagrun plans on NVIDIA GPUs through the CUDA driver API.
//
// The driver (libcuda.so.1) and NVRTC (libnvrtc.so.13 or .12) are loaded
// with dlopen at run time and called through hand-declared prototypes, so
// the package builds with cgo but without the CUDA SDK; where no driver is
// found, New reports an error matching ErrNoDriver.
//
// # Backend and sessions
//
// A Backend (device.Backend) is the device runtime. From New to Close it
// keeps what is costly to make: each device's primary context, retained
// on first use (creating one takes over 100 ms); NVRTC, loaded on first
// compile; the module cache, where every module is loaded once per device
// and kept, keyed by content (the builtin library, or the hash of a
// kernel's CUDA C or file), so that sessions of graphs built afresh share
// it; and each device's default memory pool, set to keep freed memory for
// the next run. Open makes a Session (device.Session, device.Timer,
// device.Capturer, device.Writer) that holds only what its plan needs:
// its buffers, streams, events, timing events, the C records of its ops
// and its captured graphs, and releases exactly that at Close. Live
// counts what each holds (Session.Live, and Backend.Live for the backend
// and all its sessions); everything is zero after the sessions and then
// the backend are closed.
//
// # Threads and contexts
//
// CUDA's current context belongs to an OS thread, and goroutines move
// between threads. Rather than pinning a goroutine per session, every C
// wrapper makes the right context current on the thread it runs on (one
// cuCtxGetCurrent, a thread-local read, when nothing changes) and then
// makes its driver call, inside one cgo call that cannot migrate. So any
// goroutine may call a session, several sessions run from several
// goroutines at once, and no thread is locked. The driver itself is
// thread-safe. Two rules keep sessions from disturbing each other: a
// session waits only for its own streams (cuStreamSynchronize, never
// cuCtxSynchronize, which would wait for the other sessions' work and
// invalidate their captures), and captures use relaxed mode, so one
// session's capture does not forbid another's allocations. The backend's
// shared state (devices, module cache, NVRTC) is behind one mutex, taken
// at Open and never on the run path.
//
// # Runs
//
// Streams are created non-blocking, with dag priorities mapped onto the
// device's range (see StreamPriority). Temporary device buffers come from
// the device's default memory pool in stream order (cuMemAllocAsync and
// cuMemFreeAsync); persistent ones from cuMemAlloc; pinned host buffers of
// 2 MiB and more from transparent huge pages registered with the driver
// (cuMemHostRegister; hostpin.go), smaller ones from cuMemHostAlloc;
// pageable ones from the C heap, never Go memory. Big host buffers are
// made and filled on goroutines while the driver creates the context
// (Backend.PrepareHost, which executor.Open calls; hostprep.go).
// Where the plan packs the temporaries into arenas, one allocation per
// device holds them for the session's life (arena.go); otherwise the
// pool's high-water mark measures what the eager runs held of them at
// once (Session.MemoryHighWater; poolwatch.go).
// Copies and fills that involve only host memory, and host steps, run in
// stream order through cuLaunchHostFunc. Builtin kernels (dag.Builtins) are
// compiled from CUDA C with NVRTC for the device's architecture and cached
// on disk by content hash. GEMM ops run on cuBLASLt (libcublasLt.so.13,
// found like NVRTC or through DAGRUN_CUBLASLT), loaded at the first Open
// that needs it; each GEMM's algorithm is picked at Open, once per
// signature, whatever stream it lands on (see cublas.go). Session.Submit
// (device.Submitter) takes a run's steps in stretches: plain steps (kernel
// launches, fills, copies, records, waits, cuBLASLt GEMMs) go to the
// driver from one C loop per stretch, with the op marked on a thread-local
// stack around each when CUPTI traces (the driver callback names its
// records by it), so dagrun's cost per op is the driver's; the rest go
// through Run, Record and Wait.
//
// A Session is composed of parts, one per job, each holding its own state
// and C records; the Session keeps the device.Session API and hands each
// call to its part: holdings (devices, buffers, the live count; memory.go),
// submitter (streams, events, the ops' C records; submit.go, prepare.go,
// stretch.go, external.go, task.go), hostSide (host steps' context and
// errors, Sync; sync.go), capturer (graphs; graph.go), timer (event timing,
// and the CUPTI tracer's cuptiTiming; timing.go), collectives (the NCCL
// communicator and held-back sends and recvs; collective.go), stager
// (copies between devices through host memory; peer_session.go), gemmHooks
// (cuBLASLt; cublas_backend.go) and faultState (injected faults; faults.go).
//
// The files follow the work: backend.go (the Backend, devices), modules.go
// (the module cache), session.go (a session's parts and its API), memory.go
// (buffers), initdev.go (device buffers' random and value initial contents,
// made on the device), arena.go and poolwatch.go (the temporaries' arenas,
// and the pool's measure of them), prepare.go (what each op kind does, as a
// table keyed by dag.OpKind, and its C records), submit.go (streams,
// events, Run), iterations.go (a loop body's spans per iteration under
// CUPTI),
// stretch.go (Submit), sync.go (waiting and abandoning), timing.go (op
// timing), graph.go (capture and replay), driver.go, load.c, cuda.c and
// cuda.h (the driver binding), nvrtc.go (NVRTC and its disk cache), raw.go
// (raw driver loops the benchmarks compare with).
//
// # Graphs
//
// A Session captures plans as CUDA graphs by stream capture in relaxed
// mode on an origin stream, with every other stream forked from it and
// joined back with an event, so that capture runs the same submission code
// as eager runs. Temporaries become memory nodes, host steps host nodes,
// and kernel nodes keep their streams' priorities. Updates go through
// cuGraphExecUpdate and fall back to a fresh instantiation when the driver
// refuses them (graphs with memory nodes, or changed topology); GraphStats
// counts both. Graphs belong to their session. A plan whose streams span
// devices is captured as one graph: the streams of every device fork from
// the origin stream's event and join back through an event of their own
// device (graph.go).
//
// # Several devices
//
// When a second device is first used, the backend enables peer access
// between every pair of devices that allow it, both ways, and opens each
// device's memory pool to its peers, so that copies between devices go over
// the link (Backend.Topology reports the pairs; NoPeer copies through pinned
// host memory instead). Collectives run on NCCL (libnccl.so.2, loaded at
// the first UniqueID or Join): a session joins a world of ranks with Join
// and runs each collective op as an NCCL call on its stream; see
// collective.go for how send and recv are grouped, how a failing rank
// aborts, and why captures need an eager run first.
package cuda
