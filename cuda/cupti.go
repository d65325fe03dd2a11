package cuda

/*
#include <stdlib.h>
#include "cupti.h"

static dr_cupti_result w_cupti_version(dr_cupti* c, uint32_t* v) { return c->cuptiGetVersion(v); }
static const char* w_cupti_error(dr_cupti* c, dr_cupti_result r) {
	const char* s = NULL;
	return c->cuptiGetResultString(r, &s) == 0 ? s : NULL;
}
static dr_cupti_result w_cupti_timestamp(dr_cupti* c, uint64_t* t) { return c->cuptiGetTimestamp(t); }
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// ErrNoCUPTI is reported (through errors.Is) when CUPTI cannot trace: the
// library does not load, lacks an entry point, or is a version whose record
// layouts dagrun does not know. Tracing falls back to events.
var ErrNoCUPTI = errors.New("no usable CUPTI library")

// ErrCUPTIBusy is reported (through errors.Is) when CUPTI is loaded but held
// by someone else: another profiler (Nsight Systems, a CUPTI-based tool) or
// another dagrun tracer in this process. Tracing falls back to events.
var ErrCUPTIBusy = errors.New("CUPTI is busy")

// CUPTIError is a failed CUPTI call.
type CUPTIError struct {
	Call string // the CUPTI entry point, for example "cuptiActivityEnable"
	Kind int    // the activity kind, or driver call's callback id, the call was about; 0 for none
	Code int    // the dr_cupti_result, -1 for dagrun's own sink being taken
	Msg  string // CUPTI's description of it
}

func (e *CUPTIError) Error() string {
	s := e.Call
	if e.Kind != 0 {
		s += fmt.Sprintf("(kind %d)", e.Kind)
	}
	if e.Msg == "" {
		return fmt.Sprintf("%s: CUptiResult (%d)", s, e.Code)
	}
	return fmt.Sprintf("%s: %s (%d)", s, e.Msg, e.Code)
}

// Is makes a CUPTIError that says someone else holds CUPTI match
// ErrCUPTIBusy.
func (e *CUPTIError) Is(target error) bool {
	return target == ErrCUPTIBusy && cuptiBusy(e.Code)
}

func cuptiBusy(code int) bool {
	switch code {
	case -1, C.DR_CUPTI_ERROR_HARDWARE_BUSY, C.DR_CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED,
		C.DR_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		return true
	}
	return false
}

// CUPTIVersionError is a CUPTI whose activity record layouts dagrun does not
// know; it matches ErrNoCUPTI.
type CUPTIVersionError struct {
	Path     string
	Version  uint32 // what cuptiGetVersion said
	Min, Max uint32 // the versions whose layouts dagrun declares
}

func (e *CUPTIVersionError) Error() string {
	return fmt.Sprintf("%s is CUPTI API version %d; dagrun knows the activity record layouts of versions %d to %d "+
		"(run cuda's TestCUPTILayouts against the new cupti_activity.h before widening the range)",
		e.Path, e.Version, e.Min, e.Max)
}

func (e *CUPTIVersionError) Is(target error) bool { return target == ErrNoCUPTI }

// The CUPTI API versions whose record layouts cupti.h declares and
// testdata/cupti_check.c has checked against their headers: CUDA 13.0
// Update 1, CUPTI 2025.3 (CUpti_ActivityKernel10, Memcpy6, Memset4,
// ExternalCorrelation, GraphTrace2, MemoryPool3). Another version widens the
// range only once TestCUPTILayouts passes against its headers.
const (
	cuptiMinVersion = 130001
	cuptiMaxVersion = 130001
)

// cuptiCandidates lists where libcupti is looked for, in order: DAGRUN_CUPTI
// (a library file, or a folder holding one), the dynamic loader's search,
// the CUDA toolkit (both places it keeps CUPTI), and NVIDIA's pip packages.
func cuptiCandidates(env string) []string {
	return libraryCandidates(env, []string{"libcupti.so.13"}, cudaLib, "/usr/local/cuda/extras/CUPTI/lib64",
		torchWheel+"cu13/lib", torchWheel+"cuda_cupti/lib", distWheel+"cu13/lib", distWheel+"cuda_cupti/lib")
}

// activityKind is a CUpti_ActivityKind that the tracer collects.
type activityKind uint32

const (
	activityMemcpy      activityKind = C.DR_CUPTI_KIND_MEMCPY
	activityPeerMemcpy  activityKind = C.DR_CUPTI_KIND_MEMCPY2 // enabled, read as activityMemcpy
	activityMemset      activityKind = C.DR_CUPTI_KIND_MEMSET
	activityKernel      activityKind = C.DR_CUPTI_KIND_CONCURRENT_KERNEL
	activityExternal    activityKind = C.DR_CUPTI_KIND_EXTERNAL_CORRELATION
	activityMemoryPool  activityKind = C.DR_CUPTI_KIND_MEMORY_POOL
	activityGraphLaunch activityKind = C.DR_CUPTI_KIND_GRAPH_TRACE
)

func (k activityKind) String() string {
	switch k {
	case activityMemcpy:
		return "memcpy"
	case activityPeerMemcpy:
		return "memcpy2"
	case activityMemset:
		return "memset"
	case activityKernel:
		return "kernel"
	case activityExternal:
		return "external-correlation"
	case activityMemoryPool:
		return "memory-pool"
	case activityGraphLaunch:
		return "graph-launch"
	}
	return fmt.Sprintf("activity-kind-%d", uint32(k))
}

// The kinds a node-level tracer enables: the first three must enable, the
// others are taken where CUPTI gives them. Never CUPTI_ACTIVITY_KIND_KERNEL,
// which serialises kernels. Graph-level records (GRAPH_TRACE) are asked for
// only by a whole-graph tracer (newGraphLevelTracer), and never beside
// these: while that kind is enabled CUPTI gives one record per graph launch
// instead of the records of its nodes (what TestCUPTIGraphReplay saw on the
// H100: two records, both graph launches, for two replays of six kernels).
var (
	requiredKinds = []activityKind{activityKernel, activityMemcpy, activityMemset}
	optionalKinds = []activityKind{activityPeerMemcpy, activityMemoryPool}
)

// A node-level tracer names each launch by the driver callback alone (the
// op on a thread-local stack, read at the call's entry). Naming it also by
// CUPTI's external correlation records takes API records of the submitting
// calls and a push and pop into CUPTI around each op: measured on the H100
// by BenchmarkCUPTISessionTracing/E-raw, that is what lifted CUPTI's cost
// above 1 us per launch. externalKinds are what such a tracer adds
// (newExternalTracer, kept as that benchmark's comparison).
var externalKinds = []activityKind{activityExternal}

// The kinds a whole-graph tracer enables: graph launches, which must
// enable, and external correlation records, a second way (beside the
// driver callback) to name a launch by the marker pushed around it. No
// kernel, copy or fill records: those cost the device about half a
// microsecond per kernel, which is what whole-graph timing saves.
var (
	graphLevelKinds  = []activityKind{activityGraphLaunch}
	graphNamingKinds = []activityKind{activityExternal}
)

// submitCalls are the driver calls dagrun submits work with (cuda.c and
// the library bindings): CUPTI writes API records, and so the external
// correlation records that name ops, for these calls only, which keeps the
// cost of the others untouched.
var submitCalls = []C.uint32_t{
	C.DR_CUPTI_CBID_cuLaunchKernel, C.DR_CUPTI_CBID_cuLaunchKernelEx, C.DR_CUPTI_CBID_cuGraphLaunch,
	C.DR_CUPTI_CBID_cuMemcpyHtoD_v2, C.DR_CUPTI_CBID_cuMemcpyDtoH_v2,
	C.DR_CUPTI_CBID_cuMemcpyHtoDAsync_v2, C.DR_CUPTI_CBID_cuMemcpyDtoHAsync_v2, C.DR_CUPTI_CBID_cuMemcpyDtoDAsync_v2,
	C.DR_CUPTI_CBID_cuMemcpyPeerAsync, C.DR_CUPTI_CBID_cuMemcpyAsync,
	C.DR_CUPTI_CBID_cuMemsetD8_v2, C.DR_CUPTI_CBID_cuMemsetD8Async, C.DR_CUPTI_CBID_cuMemsetD16Async, C.DR_CUPTI_CBID_cuMemsetD32Async,
	C.DR_CUPTI_CBID_cuMemAllocAsync, C.DR_CUPTI_CBID_cuMemFreeAsync, C.DR_CUPTI_CBID_cuLaunchHostFunc,
}

// graphLaunchCalls is the one driver call a whole-graph tracer names:
// eager ops are not traced by it (a session times them by events).
var graphLaunchCalls = []C.uint32_t{C.DR_CUPTI_CBID_cuGraphLaunch}

// activityRecord is one piece of device work CUPTI timed.
type activityRecord struct {
	Kind        activityKind
	Op          int64  // the op id pushed around the work's submission, -1 when none was
	Correlation uint32 // CUPTI's id of the API call that submitted it
	GraphID     uint32 // for work of a graph replay: the graph, and the node of
	GraphNodeID uint64 // the captured graph it comes from (see graphNodeID)
	Device      uint32
	Context     uint32
	Stream      uint32 // CUPTI's stream id (cuptiGetStreamId), not a CUstream
	Start, End  uint64 // nanoseconds on CUPTI's clock (cuptiGetTimestamp)
	Bytes       uint64 // copies, fills; a memory pool's size
	CopyKind    uint32 // CUpti_ActivityMemcpyKind, or the memory pool operation
	// Replay is the sequence number of the graph launch the record's work
	// belongs to (the marker pushed around it, less replayMarker), -1 for
	// work not launched as a marked replay.
	Replay int64
}

// replayMarker marks the ids pushed around a graph launch (marker plus the
// launch's sequence number) apart from op ids, which stay far below it: the
// records of a replay carry the launch's correlation id, so they all name
// the marker, and graph node ids name their ops.
const replayMarker = 1 << 62

// activityTracer collects CUPTI activity records of the work this process
// submits. pushOp and popOp bracket an op's submission so its records name
// it; flush, after the work is synchronised, returns what was recorded.
// Nothing on the submission path waits on CUPTI: records reach C buffers
// that CUPTI hands over on its own thread.
type activityTracer struct {
	lib     *C.dr_cupti
	path    string
	version uint32
	kinds   []C.int // the kinds enabled, for dr_cupti_stop
	// external names a correlation id by the op id pushed around it, also
	// for records that arrive in a later flush than their correlation.
	external *correlations
	linkBuf  []link
	// linked and externals count the launches named by the driver callback
	// and by CUPTI's external correlation records, since the tracer started.
	linked, externals uint64
	// clones maps an instantiated graph node's id to the id of the node it
	// was cloned from, for every instantiation since the tracer started.
	clones map[uint64]uint64
	// places is, by graph id, how many node places its clones above
	// showed: where a conditional body's nodes start in it (bodyNode).
	places map[uint64]uint64
	// nodeOps maps a captured graph node's id to the op pushed while it was
	// made (a stream capture of the op's submission): how a replay's records
	// name ops.
	nodeOps map[uint64]int64
	// resolved caches, by a replayed node's id, the captured node and op
	// it resolved to: a replay's records name the same nodes every time.
	// Only nodes that named an op are kept (a clone pair or a node's op
	// arriving in a later flush would change the others).
	resolved map[uint64]resolvedNode
	// graphLevel says the tracer is a whole-graph one (newGraphLevelTracer).
	graphLevel bool
	// droppedRecs counts the records CUPTI said it dropped (for want of a
	// buffer), lostRecs those dagrun lost (for want of memory): kept apart
	// so that a missing record says whose it was.
	droppedRecs uint64
	lostRecs    uint64
	// recs is the buffer flush returns, reused from flush to flush.
	recs []activityRecord
}

// resolvedNode is what a replayed node's records resolve to: the captured
// node it was cloned from and the op that node was made under.
type resolvedNode struct {
	node uint64
	op   int64
}

// activityBufferSize is the size of each buffer handed to CUPTI: room for
// about 15,000 kernel records, so a flush at the end of a run is rare to
// need more than a few.
const activityBufferSize = 4 << 20

// newActivityTracer loads CUPTI from the first candidate that opens, checks
// its version, and starts collecting node-level records: every kernel,
// copy and fill, of eager runs and graph replays alike. Errors match
// ErrNoCUPTI or ErrCUPTIBusy: the caller falls back to event timing and
// says why.
func newActivityTracer(candidates []string) (*activityTracer, error) {
	return startActivityTracer(candidates, false, false)
}

// newExternalTracer is newActivityTracer naming launches by CUPTI's
// external correlation records too.
func newExternalTracer(candidates []string) (*activityTracer, error) {
	return startActivityTracer(candidates, false, true)
}

// newGraphLevelTracer is newActivityTracer for whole graph replays only:
// one graph-launch record per replay, named by the marker pushed around
// its launch, and no records of the replayed nodes nor of eager work: the
// cheap timing of large graphs. A CUPTI that gives no graph-launch records
// is an error matching ErrNoCUPTI.
func newGraphLevelTracer(candidates []string) (*activityTracer, error) {
	return startActivityTracer(candidates, true, true)
}

func startActivityTracer(candidates []string, graphLevel, external bool) (*activityTracer, error) {
	lib := (*C.dr_cupti)(C.calloc(1, C.sizeof_dr_cupti))
	if lib == nil {
		return nil, fmt.Errorf("%w: out of memory", ErrNoCUPTI)
	}
	t := &activityTracer{lib: lib, external: newCorrelations(), clones: map[uint64]uint64{}, places: map[uint64]uint64{}, nodeOps: map[uint64]int64{},
		resolved: map[uint64]resolvedNode{}, graphLevel: graphLevel}
	p, msg := loadFirst(candidates, func(path string, why **C.char) C.int {
		return withCString(path, func(cp *C.char) C.int { return C.dr_cupti_load(lib, cp, why) })
	})
	t.path = p
	if t.path == "" {
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("%w: %s (install the CUDA toolkit or the nvidia-cuda-cupti pip package, or set DAGRUN_CUPTI to libcupti's path)",
			ErrNoCUPTI, msg)
	}
	var v C.uint32_t
	if r := C.w_cupti_version(lib, &v); r != 0 {
		err := t.err("cuptiGetVersion", 0, r)
		t.free()
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCUPTI, t.path, err)
	}
	t.version = uint32(v)
	if t.version < cuptiMinVersion || t.version > cuptiMaxVersion {
		err := &CUPTIVersionError{Path: t.path, Version: t.version, Min: cuptiMinVersion, Max: cuptiMaxVersion}
		t.free()
		return nil, err
	}
	required, optional, calls := requiredKinds, optionalKinds, submitCalls
	if external {
		required = append(slices.Clone(required), externalKinds...)
	}
	if graphLevel {
		required, optional, calls = graphLevelKinds, graphNamingKinds, graphLaunchCalls
	}
	if external {
		lib.external = 1
	}
	all := append(append([]activityKind(nil), required...), optional...)
	ckinds := (*C.int)(C.calloc(C.size_t(len(all)), C.sizeof_int))
	enabled := (*C.int)(C.calloc(C.size_t(len(all)), C.sizeof_int))
	defer C.free(unsafe.Pointer(ckinds))
	defer C.free(unsafe.Pointer(enabled))
	if ckinds == nil || enabled == nil {
		t.free()
		return nil, fmt.Errorf("%w: out of memory", ErrNoCUPTI)
	}
	ks := unsafe.Slice(ckinds, len(all))
	for i, k := range all {
		ks[i] = C.int(k)
	}
	var failed *C.char
	var kind C.int
	// calls holds no Go pointers, so C may read it during the call.
	r := C.dr_cupti_start(lib, ckinds, C.int(len(required)), C.int(len(all)), enabled,
		&calls[0], C.int(len(calls)), activityBufferSize, &failed, &kind)
	if r != 0 {
		err := t.err(C.GoString(failed), int(kind), r)
		t.free()
		if cuptiBusy(int(r)) {
			return nil, fmt.Errorf("%s: %w", t.path, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCUPTI, t.path, err)
	}
	for i, on := range unsafe.Slice(enabled, len(all)) {
		if on != 0 {
			t.kinds = append(t.kinds, ks[i])
		}
	}
	return t, nil
}

func (t *activityTracer) err(call string, kind int, r C.dr_cupti_result) error {
	e := &CUPTIError{Call: call, Kind: kind, Code: int(r)}
	if r != -1 && t.lib != nil {
		if s := C.w_cupti_error(t.lib, r); s != nil {
			e.Msg = C.GoString(s)
		}
	}
	return e
}

func (t *activityTracer) free() {
	if t.lib != nil {
		C.dr_cupti_unload(t.lib)
		C.free(unsafe.Pointer(t.lib))
		t.lib = nil
	}
}

// enabled reports whether kind is being collected (graph-launch and memory
// pool records are taken only where CUPTI gives them).
func (t *activityTracer) enabled(kind activityKind) bool {
	for _, k := range t.kinds {
		if activityKind(k) == kind {
			return true
		}
	}
	return false
}

// recordDevice turns CUPTI's records of the device's work (kernels,
// copies, fills) off or back on, for the whole process. CUPTI decides at
// each launch whether the work launched is recorded, so work launched
// before still is; a recorded kernel costs the device about 2.4 us more
// than one that is not (looptrace_gpu_test.go).
func (t *activityTracer) recordDevice(on bool) error {
	var ks []C.int
	for _, k := range t.kinds {
		switch activityKind(k) {
		case activityKernel, activityMemcpy, activityPeerMemcpy, activityMemset:
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil
	}
	var sw C.int
	call := "cuptiActivityDisable"
	if on {
		sw, call = 1, "cuptiActivityEnable"
	}
	if r := C.dr_cupti_switch(t.lib, &ks[0], C.int(len(ks)), sw); r != 0 {
		return t.err(call, 0, r)
	}
	return nil
}

// pushOp names op as the submitter of the work the calling OS thread
// submits until popOp. The caller keeps the goroutine on one thread
// (runtime.LockOSThread) between the two, or does both in the C call that
// submits.
func (t *activityTracer) pushOp(op int) error {
	if op < 0 {
		return fmt.Errorf("cupti: op id %d is negative", op)
	}
	if r := C.dr_cupti_push(t.lib, C.uint64_t(op)); r != 0 {
		return t.err("cuptiActivityPushExternalCorrelationId", 0, r)
	}
	return nil
}

func (t *activityTracer) popOp() error {
	if r := C.dr_cupti_pop(t.lib); r != 0 {
		return t.err("cuptiActivityPopExternalCorrelationId", 0, r)
	}
	return nil
}

// graphNodeID is the id CUPTI gives a captured graph node in the records
// of its replays (activityRecord.GraphNodeID): the capture maps it to the
// node's op.
func (t *activityTracer) graphNodeID(node C.CUgraphNode) (uint64, error) {
	var id C.uint64_t
	if r := C.dr_cupti_graph_node_id(t.lib, node, &id); r != 0 {
		return 0, t.err("cuptiGetGraphNodeId", 0, r)
	}
	return uint64(id), nil
}

// now is CUPTI's clock, the one records' Start and End are on.
func (t *activityTracer) now() (uint64, error) {
	var ts C.uint64_t
	if r := C.w_cupti_timestamp(t.lib, &ts); r != 0 {
		return 0, t.err("cuptiGetTimestamp", 0, r)
	}
	return uint64(ts), nil
}

// flush returns the records of work finished so far, each named by the op
// pushed around its submission (Op -1 when none was). CUPTI's flush does not
// synchronise: the caller synchronises the work first. The records are
// converted from C and resolved in one pass into a buffer the tracer
// reuses: they are valid until the next flush.
func (t *activityTracer) flush() ([]activityRecord, error) {
	err := t.take(true)
	return t.resolvePending(), err
}

// take moves what CUPTI flushes into the tracer's pending records and
// links, not yet named (resolvePending names them). Forced, every buffer
// comes; otherwise (CUPTI's default flush) those whose records are all
// complete, which after a synchronisation is usually all of them. A forced
// flush makes CUPTI's next traced call on the host cost about 0.25 ms more
// (the H100, CUPTI 13.0), which would hold back the first op of every run
// after it, so a session forces one only when what it waits for has not
// come (cuptiTiming.collect).
func (t *activityTracer) take(force bool) error {
	var out *C.dr_cupti_rec
	var clones, links, nodes *C.uint64_t
	var n, nclones, nlinks, nnodes C.size_t
	var dropped, lost C.uint64_t
	flag := C.int(0)
	if force {
		flag = 1
	}
	r := C.dr_cupti_take(t.lib, flag, &out, &n, &clones, &nclones, &links, &nlinks, &nodes, &nnodes, &dropped, &lost)
	defer C.free(unsafe.Pointer(out))
	defer C.free(unsafe.Pointer(clones))
	defer C.free(unsafe.Pointer(links))
	defer C.free(unsafe.Pointer(nodes))
	if nnodes > 0 {
		pairs := unsafe.Slice(nodes, 2*int(nnodes))
		for i := 0; i < len(pairs); i += 2 {
			// A node made under a replay's marker names no op.
			if op := int64(pairs[i+1]); op < replayMarker {
				t.nodeOps[uint64(pairs[i])] = op
			}
		}
	}
	var linkPairs []C.uint64_t
	if nlinks > 0 {
		linkPairs = unsafe.Slice(links, 2*int(nlinks))
		t.linked += uint64(nlinks)
	}
	if nclones > 0 {
		pairs := unsafe.Slice(clones, 2*int(nclones))
		for i := 0; i < len(pairs); i += 2 {
			c := uint64(pairs[i])
			t.clones[c] = uint64(pairs[i+1])
			t.places[c>>32] = max(t.places[c>>32], c&0xffffffff+1)
		}
	}
	t.droppedRecs += uint64(dropped)
	t.lostRecs += uint64(lost)
	have := len(t.recs)
	raw := slices.Grow(t.recs, int(n))[:have+int(n)]
	if n > 0 {
		for j, c := range unsafe.Slice(out, int(n)) {
			i := have + j
			raw[i] = activityRecord{Replay: -1,
				Kind: activityKind(c.kind), Op: int64(c.external), Correlation: uint32(c.correlation),
				GraphID: uint32(c.graphId), GraphNodeID: uint64(c.graphNodeId),
				Device: uint32(c.device), Context: uint32(c.context), Stream: uint32(c.stream),
				Start: uint64(c.start), End: uint64(c.end), Bytes: uint64(c.bytes), CopyKind: uint32(c.sub),
			}
			if raw[i].Kind == activityExternal {
				t.externals++
			}
		}
	}
	for i := 0; i < len(linkPairs); i += 2 {
		t.linkBuf = append(t.linkBuf, link{corr: uint32(linkPairs[i]), id: int64(linkPairs[i+1])})
	}
	t.recs = raw
	if r != 0 {
		return t.err("cuptiActivityFlushAll", 0, r)
	}
	return nil
}

// resolvePending names the records taken since the last call and empties
// the pending lists. The records returned are valid until the next take.
func (t *activityTracer) resolvePending() []activityRecord {
	recs := resolveRecordsCached(t.recs, t.linkBuf, t.external, t.clones, t.places, t.nodeOps, t.resolved)
	t.recs, t.linkBuf = t.recs[:0], t.linkBuf[:0]
	return recs
}

// dropped is the number of records CUPTI dropped for want of buffer space,
// and that dagrun lost for want of memory, since the tracer started
// (cuptiDropped and lost apart).
func (t *activityTracer) dropped() uint64 { return t.droppedRecs + t.lostRecs }

// cuptiDropped is the number of records CUPTI said it dropped since the
// tracer started (cuptiActivityGetNumDroppedRecords after each buffer).
func (t *activityTracer) cuptiDropped() uint64 { return t.droppedRecs }

// lost is the number of records, and correlation, clone and node pairs,
// dagrun could not keep for want of memory since the tracer started.
func (t *activityTracer) lost() uint64 { return t.lostRecs }

// tracerStats are the sink's diagnostics since the tracer started (see
// dr_cupti_stats in cupti.h): what a test logs when records are missing.
type tracerStats struct {
	Dropped, Lost  uint64 // CUPTI's dropped count, dagrun's own losses
	DroppedBefore  uint64 // drained at the start: dropped while no tracer gave buffers
	Buffers        uint64 // buffers completed while the tracer held the sink
	IdleBuffers    uint64 // buffers completed with no tracer (or none given), freed unread
	Declined       uint64 // buffer requests declined (no memory) since the start
	DeclinedBefore uint64 // ... and while no tracer held the sink, before it
	Requests       uint64 // buffers CUPTI asked for
	Fresh          uint64 // ... given newly allocated, not a spare
	Zeroed         bool   // CUPTI takes the sink's buffers as zeroed, and does not zero them itself
	Drops          []bufferDrop
}

// bufferDrop is one buffer beside which CUPTI reported dropped records.
type bufferDrop struct {
	Ctx     uint64 // the context its completion callback named (documented as always NULL)
	Stream  uint32 // ... and the stream (documented as always 0)
	Records uint32 // records parsed from the buffer
	Dropped uint64 // cuptiActivityGetNumDroppedRecords's count after it
	Valid   uint64 // its valid bytes
	Seq     uint64 // buffers the tracer had completed before it
}

func (t *activityTracer) stats() tracerStats {
	var c C.dr_cupti_stats
	C.dr_cupti_get_stats(&c)
	s := tracerStats{Dropped: uint64(c.dropped), Lost: uint64(c.lost), DroppedBefore: uint64(c.dropped_before),
		Buffers: uint64(c.buffers), IdleBuffers: uint64(c.idle_buffers), Declined: uint64(c.declined),
		DeclinedBefore: uint64(c.declined_before), Requests: uint64(c.requests), Fresh: uint64(c.fresh), Zeroed: c.zeroed != 0}
	for _, d := range c.drops[:min(int(c.ndrops), len(c.drops))] {
		s.Drops = append(s.Drops, bufferDrop{Ctx: uint64(d.ctx), Stream: uint32(d.stream), Records: uint32(d.records),
			Dropped: uint64(d.dropped), Valid: uint64(d.valid), Seq: uint64(d.seq)})
	}
	return s
}

func (s tracerStats) String() string {
	return fmt.Sprintf("CUPTI dropped %d, dagrun lost %d, dropped before the tracer %d (drained), buffers %d (idle %d), "+
		"requests %d (fresh %d, zeroed by dagrun %v), declined %d (before the tracer %d), buffers with drops %+v",
		s.Dropped, s.Lost, s.DroppedBefore, s.Buffers, s.IdleBuffers, s.Requests, s.Fresh, s.Zeroed, s.Declined, s.DeclinedBefore, s.Drops)
}

// close stops collecting; records not flushed are discarded.
func (t *activityTracer) close() error {
	if t.lib == nil {
		return nil
	}
	var err error
	var ks *C.int // t.kinds holds no Go pointers, so C may read it
	if len(t.kinds) > 0 {
		ks = &t.kinds[0]
	}
	n := len(t.kinds)
	if r := C.dr_cupti_stop(t.lib, ks, C.int(n)); r != 0 {
		err = t.err("cuptiActivityDisable", 0, r)
	}
	t.free()
	return err
}
