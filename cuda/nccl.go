package cuda

/*
#include <stdlib.h>
#include <string.h>
#include "nccl.h"

static ncclResult_t n_version(dr_nccl* n, int* v) { return n->ncclGetVersion(v); }
static ncclResult_t n_unique_id(dr_nccl* n, dr_nccl_uid* id) { return n->ncclGetUniqueId(id); }
static ncclResult_t n_init_all(dr_nccl* n, ncclComm_t* comms, int ndev, const int* devs) { return n->ncclCommInitAll(comms, ndev, devs); }
static ncclResult_t n_destroy(dr_nccl* n, ncclComm_t c) { return n->ncclCommDestroy(c); }
static ncclResult_t n_abort(dr_nccl* n, ncclComm_t c) { return n->ncclCommAbort(c); }
static ncclResult_t n_async_error(dr_nccl* n, ncclComm_t c, ncclResult_t* r) { return n->ncclCommGetAsyncError(c, r); }
static const char* n_error_string(dr_nccl* n, ncclResult_t r) { return n->ncclGetErrorString(r); }
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// ErrNoNCCL is reported (through errors.Is) when collectives must run on
// CUDA but no usable NCCL library (libnccl.so.2) can be loaded.
var ErrNoNCCL = errors.New("no usable NCCL library (libnccl.so.2)")

// NCCLError is a failed NCCL call.
type NCCLError struct {
	Call string // the NCCL entry point, for example "ncclAllReduce"
	Code int    // the ncclResult_t
	Msg  string // NCCL's description of it
}

func (e *NCCLError) Error() string {
	return fmt.Sprintf("%s: %s (ncclResult_t %d)", e.Call, e.Msg, e.Code)
}

// The NCCL versions the binding knows: the hand declarations of nccl.h
// hold for NCCL 2 from 2.10 (ncclAvg) on; they were taken from 2.28.
const (
	ncclMajorKnown = 2
	ncclMinorLeast = 10
)

// NCCLUniqueID is ncclUniqueId: what rank 0 makes and every rank needs to
// join a communicator across processes.
type NCCLUniqueID [C.DR_NCCL_UNIQUE_ID_BYTES]byte

// ncclCandidates lists where libnccl is looked for, in order: DAGRUN_LIBNCCL
// (a library file, or a folder holding libnccl.so.2), the dynamic loader's
// search (ldconfig, LD_LIBRARY_PATH), the system folder, and NVIDIA's pip
// package (PyTorch's venv, then the system Python's).
func ncclCandidates(env string) []string {
	return libraryCandidates(env, []string{"libnccl.so.2"}, "/usr/lib/x86_64-linux-gnu",
		torchWheel+"nccl/lib", distWheel+"nccl/lib")
}

// ncclLib is a loaded NCCL.
type ncclLib struct {
	lib                 *C.dr_nccl
	path                string
	major, minor, patch int
}

// openNCCL loads the first candidate that opens, holds every entry point
// the binding uses and is a version the binding knows. Errors match
// ErrNoNCCL and name every library tried.
func openNCCL(candidates []string) (*ncclLib, error) {
	lib := (*C.dr_nccl)(C.calloc(1, C.sizeof_dr_nccl))
	if lib == nil {
		return nil, fmt.Errorf("%w: out of memory", ErrNoNCCL)
	}
	var tried []string
	for _, p := range candidates {
		cp := C.CString(p)
		var why *C.char
		rc := C.dr_nccl_load(lib, cp, &why)
		C.free(unsafe.Pointer(cp))
		switch rc {
		case 0:
			n := &ncclLib{lib: lib, path: p}
			if err := n.checkVersion(); err != nil {
				C.dr_nccl_unload(lib)
				tried = append(tried, err.Error())
				continue
			}
			return n, nil
		case 1:
			tried = append(tried, fmt.Sprintf("%s lacks %s", p, C.GoString(why)))
		default:
			tried = append(tried, C.GoString(why))
		}
	}
	C.free(unsafe.Pointer(lib))
	return nil, fmt.Errorf("%w: %s (install NCCL 2, for example the nvidia-nccl-cu13 pip package, or set DAGRUN_LIBNCCL to libnccl.so.2's path; the cpu backend runs collectives without it)",
		ErrNoNCCL, strings.Join(tried, "; "))
}

// checkVersion reads ncclGetVersion and refuses a major version the hand
// declarations were not written for.
func (n *ncclLib) checkVersion() error {
	var v C.int
	if err := n.check("ncclGetVersion", C.n_version(n.lib, &v)); err != nil {
		return fmt.Errorf("%s: %w", n.path, err)
	}
	n.major, n.minor, n.patch = splitNCCLVersion(int(v))
	if n.major != ncclMajorKnown || n.minor < ncclMinorLeast {
		return fmt.Errorf("%s is NCCL %s; dagrun's binding knows NCCL %d.%d to %d.x (newer majors may change the ABI)",
			n.path, n.Version(), ncclMajorKnown, ncclMinorLeast, ncclMajorKnown)
	}
	return nil
}

// splitNCCLVersion decodes NCCL_VERSION_CODE: major*10000 + minor*100 +
// patch since NCCL 2.9, major*1000 + minor*100 + patch before.
func splitNCCLVersion(v int) (major, minor, patch int) {
	if v < 20900 {
		return v / 1000, v % 1000 / 100, v % 100
	}
	return v / 10000, v % 10000 / 100, v % 100
}

// Version is the library's version, for example "2.28.3".
func (n *ncclLib) Version() string { return fmt.Sprintf("%d.%d.%d", n.major, n.minor, n.patch) }

func (n *ncclLib) close() {
	if n.lib != nil {
		C.dr_nccl_unload(n.lib)
		C.free(unsafe.Pointer(n.lib))
		n.lib = nil
	}
}

func (n *ncclLib) check(call string, r C.ncclResult_t) error {
	if r == C.DR_NCCL_SUCCESS {
		return nil
	}
	e := &NCCLError{Call: call, Code: int(r)}
	if s := C.n_error_string(n.lib, r); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// uniqueID makes the id that rank 0 hands to the others (through
// internal/comm's rendezvous) for initRank.
func (n *ncclLib) uniqueID() (NCCLUniqueID, error) {
	var id C.dr_nccl_uid
	err := n.check("ncclGetUniqueId", C.n_unique_id(n.lib, &id))
	var out NCCLUniqueID
	copy(out[:], C.GoBytes(unsafe.Pointer(&id), C.DR_NCCL_UNIQUE_ID_BYTES))
	return out, err
}

// ncclComm is one rank's communicator, on one device.
type ncclComm struct {
	n           *ncclLib
	comm        C.ncclComm_t
	rank, world int
}

// initAll makes the communicators of one process driving every device of
// devs: comms[r] is rank r, on device devs[r].
func (n *ncclLib) initAll(devs []int) ([]*ncclComm, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("ncclCommInitAll: no devices")
	}
	cdevs := (*C.int)(C.calloc(C.size_t(len(devs)), C.sizeof_int))
	raw := (*C.ncclComm_t)(C.calloc(C.size_t(len(devs)), C.size_t(unsafe.Sizeof(C.ncclComm_t(nil)))))
	defer C.free(unsafe.Pointer(cdevs))
	defer C.free(unsafe.Pointer(raw))
	if cdevs == nil || raw == nil {
		return nil, fmt.Errorf("ncclCommInitAll: out of host memory")
	}
	for i, d := range devs {
		unsafe.Slice(cdevs, len(devs))[i] = C.int(d)
	}
	if err := n.check("ncclCommInitAll", C.n_init_all(n.lib, raw, C.int(len(devs)), cdevs)); err != nil {
		return nil, err
	}
	comms := make([]*ncclComm, len(devs))
	for i, c := range unsafe.Slice(raw, len(devs)) {
		comms[i] = &ncclComm{n: n, comm: c, rank: i, world: len(devs)}
	}
	return comms, nil
}

// initRank joins rank of a world of world ranks (one per process) on the
// device of context c with res; every rank calls it with the id rank 0
// made, and it returns when all have.
func (n *ncclLib) initRank(d *driver, c C.CUcontext, world, rank int, id NCCLUniqueID, res NCCLResources) (*ncclComm, error) {
	var cid C.dr_nccl_uid
	C.memcpy(unsafe.Pointer(&cid), unsafe.Pointer(&id[0]), C.DR_NCCL_UNIQUE_ID_BYTES)
	var cfg *C.dr_nccl_config
	call := "ncclCommInitRank"
	if !res.isZero() {
		if !n.configurable() {
			return nil, fmt.Errorf("NCCL %s (%s) cannot bound a communicator's CTAs: that needs ncclCommInitRankConfig of NCCL 2.17 or later (leave NCCLResources unset, or set NCCL_MAX_CTAS)", n.Version(), n.path)
		}
		undef := func(v int) C.int {
			if v == 0 {
				return C.DR_NCCL_CONFIG_UNDEF
			}
			return C.int(v)
		}
		// C memory: NCCL reads it during the call.
		cfg = (*C.dr_nccl_config)(C.calloc(1, C.sizeof_dr_nccl_config))
		if cfg == nil {
			return nil, errors.New("ncclCommInitRankConfig: out of host memory")
		}
		defer C.free(unsafe.Pointer(cfg))
		*cfg = C.dr_nccl_config{size: C.sizeof_dr_nccl_config, magic: C.DR_NCCL_API_MAGIC, version: C.DR_NCCL_CONFIG_VERSION,
			blocking: C.DR_NCCL_CONFIG_UNDEF, cgaClusterSize: undef(res.CGAClusterSize), minCTAs: undef(res.MinCTAs), maxCTAs: undef(res.MaxCTAs),
			splitShare: C.DR_NCCL_CONFIG_UNDEF}
		call = "ncclCommInitRankConfig"
	}
	var comm C.ncclComm_t
	if err := n.check(call, C.dr_nccl_init_rank(d.api, c, n.lib, &comm, C.int(world), &cid, C.int(rank), cfg)); err != nil {
		return nil, err
	}
	return &ncclComm{n: n, comm: comm, rank: rank, world: world}, nil
}

// configurable reports whether the library bounds a communicator's
// resources (ncclCommInitRankConfig, NCCL 2.17 and later).
func (n *ncclLib) configurable() bool {
	return n.lib.ncclCommInitRankConfig != nil && n.major*100+n.minor >= 217
}

// destroy frees the communicator once its work is done.
func (c *ncclComm) destroy() error {
	if c.comm == nil {
		return nil
	}
	err := c.n.check("ncclCommDestroy", C.n_destroy(c.n.lib, c.comm))
	c.comm = nil
	return err
}

// abort frees the communicator at once, cancelling its pending work: what
// a rank does when another failed, so that nothing waits for it.
func (c *ncclComm) abort() error {
	if c.comm == nil {
		return nil
	}
	err := c.n.check("ncclCommAbort", C.n_abort(c.n.lib, c.comm))
	c.comm = nil
	return err
}

// asyncError reports an error NCCL found while the work ran (a peer gone,
// for example), or nil.
func (c *ncclComm) asyncError() error {
	var r C.ncclResult_t
	if err := c.n.check("ncclCommGetAsyncError", C.n_async_error(c.n.lib, c.comm, &r)); err != nil {
		return err
	}
	if r == C.DR_NCCL_SUCCESS || r == C.DR_NCCL_IN_PROGRESS {
		return nil
	}
	return c.n.check("ncclCommGetAsyncError", r)
}

// ncclDType is the NCCL data type of a dag element type.
func ncclDType(dt dag.DType) (C.int, error) {
	switch dt {
	case dag.U8:
		return C.DR_NCCL_UINT8, nil
	case dag.I32:
		return C.DR_NCCL_INT32, nil
	case dag.I64:
		return C.DR_NCCL_INT64, nil
	case dag.F32:
		return C.DR_NCCL_FLOAT32, nil
	case dag.F64:
		return C.DR_NCCL_FLOAT64, nil
	case dag.F16:
		return C.DR_NCCL_FLOAT16, nil
	case dag.BF16:
		return C.DR_NCCL_BFLOAT16, nil
	}
	return 0, fmt.Errorf("NCCL collectives do not take element type %s", dt)
}

// ncclCall is one NCCL call of a group. Count is in elements (of send for
// all-gather, of recv for reduce-scatter, else of the buffer); Arg is a
// broadcast's root or a send's or recv's peer.
type ncclCall struct {
	Kind       dag.OpKind
	Send, Recv C.CUdeviceptr
	Count      int64
	DType      dag.DType
	Reduction  dag.Reduction
	Arg        int
	Comm       *ncclComm
	Stream     C.CUstream
}

// ncclKind is the NCCL call of one collective kind: its number in
// dr_nccl_call, its name for errors, and, where the kind needs it, shape,
// which sets the call's second view and its root or peer and returns its
// element count (count is the first view's).
type ncclKind struct {
	call  C.int
	name  string
	shape func(hd *holdings, rec *C.dr_nccl_call, op *dag.Op, count int64) int64
}

// ncclKinds holds every collective kind (TestNCCLKinds checks).
var ncclKinds = map[dag.OpKind]ncclKind{
	dag.AllReduce: {call: C.DR_NCCL_CALL_ALL_REDUCE, name: "ncclAllReduce"},
	dag.AllGather: {call: C.DR_NCCL_CALL_ALL_GATHER, name: "ncclAllGather",
		shape: func(hd *holdings, rec *C.dr_nccl_call, op *dag.Op, count int64) int64 {
			rec.recv = hd.ptr(op.Access[1].View)
			return count // of in
		}},
	dag.ReduceScatter: {call: C.DR_NCCL_CALL_REDUCE_SCATTER, name: "ncclReduceScatter",
		shape: func(hd *holdings, rec *C.dr_nccl_call, op *dag.Op, _ int64) int64 {
			rec.recv = hd.ptr(op.Access[1].View)
			return op.Access[1].Size / op.Access[1].Buf.DType.Size() // of out
		}},
	dag.Broadcast: {call: C.DR_NCCL_CALL_BROADCAST, name: "ncclBroadcast", shape: ncclArg(func(c *dag.CollectiveSpec) int { return c.Root })},
	dag.Send:      {call: C.DR_NCCL_CALL_SEND, name: "ncclSend", shape: ncclArg(func(c *dag.CollectiveSpec) int { return c.Peer })},
	dag.Recv:      {call: C.DR_NCCL_CALL_RECV, name: "ncclRecv", shape: ncclArg(func(c *dag.CollectiveSpec) int { return c.Peer })},
}

// ncclArg sets the call's root or peer, which arg picks.
func ncclArg(arg func(*dag.CollectiveSpec) int) func(*holdings, *C.dr_nccl_call, *dag.Op, int64) int64 {
	return func(_ *holdings, rec *C.dr_nccl_call, op *dag.Op, count int64) int64 {
		rec.arg = C.int(arg(op.Collective))
		return count
	}
}

// cCalls lays calls out in C memory; the caller frees the result.
func (n *ncclLib) cCalls(calls []ncclCall) (*C.dr_nccl_call, error) {
	if len(calls) == 0 {
		return nil, fmt.Errorf("an NCCL group of no calls")
	}
	cc := (*C.dr_nccl_call)(C.calloc(C.size_t(len(calls)), C.sizeof_dr_nccl_call))
	if cc == nil {
		return nil, fmt.Errorf("NCCL group: out of host memory")
	}
	out := unsafe.Slice(cc, len(calls))
	for i, g := range calls {
		k, ok := ncclKinds[g.Kind]
		kind := k.call
		dt, err := ncclDType(g.DType)
		switch {
		case !ok:
			err = fmt.Errorf("%s is not an NCCL call", g.Kind)
		case g.Comm == nil || g.Comm.comm == nil:
			err = fmt.Errorf("%s: the communicator is %w", ncclKinds[g.Kind].name, device.ErrClosed)
		case g.Count < 0:
			err = fmt.Errorf("%s: %d elements", ncclKinds[g.Kind].name, g.Count)
		case !g.Reduction.Valid():
			err = fmt.Errorf("%s: unknown reduction %d", ncclKinds[g.Kind].name, g.Reduction)
		}
		if err != nil {
			C.free(unsafe.Pointer(cc))
			return nil, err
		}
		p := &out[i]
		p.kind = kind
		p.send, p.recv = g.Send, g.Recv
		p.count = C.size_t(g.Count)
		p.dtype = dt
		p.op = C.int(g.Reduction) // dag.Reduction's values are ncclRedOp_t's
		p.arg = C.int(g.Arg)
		p.comm = g.Comm.comm
		p.stream = g.Stream
	}
	return cc, nil
}

// group issues calls as one NCCL group: in one process, the calls of every
// rank of a collective go in one group (NCCL waits for all ranks of a
// collective, so issuing them one by one from one thread would deadlock).
// They are enqueued on their streams when group returns.
func (n *ncclLib) group(calls []ncclCall) error {
	cc, err := n.cCalls(calls)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cc))
	var failed C.int
	r := C.dr_nccl_group(n.lib, cc, C.int(len(calls)), &failed)
	call := "ncclGroupEnd"
	if failed >= 0 {
		call = ncclKinds[calls[failed].Kind].name
	}
	return n.check(call, r)
}

// ncclDeclared lists the values and sizes that nccl.h declares by hand,
// for TestNCCLHeader to compare with the real header.
func ncclDeclared() map[string]int {
	return map[string]int{
		"sizeof(ncclUniqueId)":                  int(C.sizeof_dr_nccl_uid),
		"NCCL_CONFIG_UNDEF_INT":                 C.DR_NCCL_CONFIG_UNDEF,
		"offsetof(ncclConfig_t,blocking)":       int(unsafe.Offsetof(C.dr_nccl_config{}.blocking)),
		"offsetof(ncclConfig_t,cgaClusterSize)": int(unsafe.Offsetof(C.dr_nccl_config{}.cgaClusterSize)),
		"offsetof(ncclConfig_t,minCTAs)":        int(unsafe.Offsetof(C.dr_nccl_config{}.minCTAs)),
		"offsetof(ncclConfig_t,maxCTAs)":        int(unsafe.Offsetof(C.dr_nccl_config{}.maxCTAs)),
		"offsetof(ncclConfig_t,netName)":        int(unsafe.Offsetof(C.dr_nccl_config{}.netName)),
		"offsetof(ncclConfig_t,splitShare)":     int(unsafe.Offsetof(C.dr_nccl_config{}.splitShare)),
		"sizeof(ncclResult_t)":                  int(C.sizeof_ncclResult_t),
		"sizeof(ncclRedOp_t)":                   int(C.sizeof_int),
		"sizeof(ncclDataType_t)":                int(C.sizeof_int),
		"ncclSuccess":                           C.DR_NCCL_SUCCESS,
		"ncclUnhandledCudaError":                C.DR_NCCL_UNHANDLED_CUDA_ERROR,
		"ncclSystemError":                       C.DR_NCCL_SYSTEM_ERROR,
		"ncclInternalError":                     C.DR_NCCL_INTERNAL_ERROR,
		"ncclInvalidArgument":                   C.DR_NCCL_INVALID_ARGUMENT,
		"ncclInvalidUsage":                      C.DR_NCCL_INVALID_USAGE,
		"ncclRemoteError":                       C.DR_NCCL_REMOTE_ERROR,
		"ncclInProgress":                        C.DR_NCCL_IN_PROGRESS,
		"ncclSum":                               C.DR_NCCL_SUM,
		"ncclProd":                              C.DR_NCCL_PROD,
		"ncclMax":                               C.DR_NCCL_MAX,
		"ncclMin":                               C.DR_NCCL_MIN,
		"ncclAvg":                               C.DR_NCCL_AVG,
		"ncclInt8":                              C.DR_NCCL_INT8,
		"ncclUint8":                             C.DR_NCCL_UINT8,
		"ncclInt32":                             C.DR_NCCL_INT32,
		"ncclUint32":                            C.DR_NCCL_UINT32,
		"ncclInt64":                             C.DR_NCCL_INT64,
		"ncclUint64":                            C.DR_NCCL_UINT64,
		"ncclFloat16":                           C.DR_NCCL_FLOAT16,
		"ncclFloat32":                           C.DR_NCCL_FLOAT32,
		"ncclFloat64":                           C.DR_NCCL_FLOAT64,
		"ncclBfloat16":                          C.DR_NCCL_BFLOAT16,
		"NCCL_MAJOR":                            ncclMajorKnown,
	}
}
