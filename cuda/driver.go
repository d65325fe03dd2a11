package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda.h"

#define CTXCALL(call) do { CUresult r_ = dr_ctx(a, c); if (r_ != 0) return r_; return (call); } while (0)

static CUresult w_init(dr_api* a) { return a->cuInit(0); }
static CUresult w_driver_version(dr_api* a, int* v) { return a->cuDriverGetVersion(v); }
static CUresult w_device_count(dr_api* a, int* n) { return a->cuDeviceGetCount(n); }
static CUresult w_device_get(dr_api* a, CUdevice* d, int i) { return a->cuDeviceGet(d, i); }
static CUresult w_device_name(dr_api* a, char* s, int n, CUdevice d) { return a->cuDeviceGetName(s, n, d); }
static CUresult w_device_attr(dr_api* a, int* v, int attr, CUdevice d) { return a->cuDeviceGetAttribute(v, attr, d); }
static CUresult w_primary_retain(dr_api* a, CUcontext* c, CUdevice d) { return a->cuDevicePrimaryCtxRetain(c, d); }
static CUresult w_primary_release(dr_api* a, CUdevice d) { return a->cuDevicePrimaryCtxRelease(d); }
static const char* w_error_name(dr_api* a, CUresult r) { const char* s = NULL; return a->cuGetErrorName(r, &s) == 0 ? s : NULL; }
static const char* w_error_string(dr_api* a, CUresult r) { const char* s = NULL; return a->cuGetErrorString(r, &s) == 0 ? s : NULL; }
static CUresult w_priority_range(dr_api* a, CUcontext c, int* least, int* greatest) { CTXCALL(a->cuCtxGetStreamPriorityRange(least, greatest)); }
static CUresult w_mem_info(dr_api* a, CUcontext c, size_t* free, size_t* total) { CTXCALL(a->cuMemGetInfo(free, total)); }
static CUresult w_ctx_sync(dr_api* a, CUcontext c) { CTXCALL(a->cuCtxSynchronize()); }
static CUresult w_stream_create(dr_api* a, CUcontext c, CUstream* s, int prio) { CTXCALL(a->cuStreamCreateWithPriority(s, DR_STREAM_NON_BLOCKING, prio)); }
static CUresult w_stream_destroy(dr_api* a, CUcontext c, CUstream s) { CTXCALL(a->cuStreamDestroy(s)); }
static CUresult w_event_create(dr_api* a, CUcontext c, CUevent* e, unsigned int flags) { CTXCALL(a->cuEventCreate(e, flags)); }
static CUresult w_event_destroy(dr_api* a, CUcontext c, CUevent e) { CTXCALL(a->cuEventDestroy(e)); }
static CUresult w_mem_alloc(dr_api* a, CUcontext c, CUdeviceptr* p, size_t n) { CTXCALL(a->cuMemAlloc(p, n)); }
static CUresult w_mem_free(dr_api* a, CUcontext c, CUdeviceptr p) { CTXCALL(a->cuMemFree(p)); }
static CUresult w_host_alloc(dr_api* a, CUcontext c, void** p, size_t n) { CTXCALL(a->cuMemHostAlloc(p, n, DR_MEMHOSTALLOC_PORTABLE | DR_MEMHOSTALLOC_DEVICEMAP)); }
static CUresult w_host_free(dr_api* a, CUcontext c, void* p) { CTXCALL(a->cuMemFreeHost(p)); }
// The synchronous copy and memset below run on the legacy stream and may
// return before the device is done: a copy from pageable memory returns
// once the source is staged, a memset of device memory at once. dagrun's
// streams are non-blocking, so they do not wait for the legacy stream:
// each call waits for it before returning (a Write racing the next replay
// lost words on the H100 otherwise).
#define SYNCCALL(call) do { CUresult r_ = dr_ctx(a, c); if (r_ != 0) return r_; r_ = (call); if (r_ != 0) return r_; return a->cuStreamSynchronize(NULL); } while (0)
static CUresult w_htod(dr_api* a, CUcontext c, CUdeviceptr d, const void* h, size_t n) { SYNCCALL(a->cuMemcpyHtoD(d, h, n)); }
static CUresult w_dtoh(dr_api* a, CUcontext c, void* h, CUdeviceptr d, size_t n) { CTXCALL(a->cuMemcpyDtoH(h, d, n)); }
static CUresult w_memset8(dr_api* a, CUcontext c, CUdeviceptr d, size_t n) { SYNCCALL(a->cuMemsetD8(d, 0, n)); }
static CUresult w_module_load(dr_api* a, CUcontext c, CUmodule* m, const void* image) { CTXCALL(a->cuModuleLoadData(m, image)); }
static CUresult w_module_unload(dr_api* a, CUcontext c, CUmodule m) { CTXCALL(a->cuModuleUnload(m)); }
static CUresult w_module_function(dr_api* a, CUcontext c, CUfunction* f, CUmodule m, const char* name) { CTXCALL(a->cuModuleGetFunction(f, m, name)); }
// w_func_load loads f's code onto the device now. Under lazy module
// loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a
// function is loaded at its first launch: for a graph captured before any
// eager run, that is the first replay, which then costs hundreds of
// microseconds more than the others.
static CUresult w_func_load(dr_api* a, CUcontext c, CUfunction f) {
	if (a->cuFuncLoad != NULL) { CTXCALL(a->cuFuncLoad(f)); }
	if (a->cuFuncGetAttribute != NULL) {
		int v;
		CTXCALL(a->cuFuncGetAttribute(&v, 0, f)); // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	}
	return 0;
}
static CUresult w_pool_setup(dr_api* a, CUcontext c, CUdevice d, CUmemoryPool* pool) {
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	r = a->cuDeviceGetDefaultMemPool(pool, d);
	if (r != 0) return r;
	// Keep freed memory in the pool between runs instead of returning it at each sync.
	unsigned long long keep = ~0ull;
	return a->cuMemPoolSetAttribute(*pool, DR_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
}
static CUresult w_pool_trim(dr_api* a, CUcontext c, CUmemoryPool pool) {
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	unsigned long long none = 0;
	r = a->cuMemPoolSetAttribute(pool, DR_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none);
	if (r != 0) return r;
	return a->cuMemPoolTrimTo(pool, 0);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// driver is a loaded libcuda: a table of entry points in C memory. It
// makes the calls on devices, contexts, modules, memory and pinned host
// memory itself, and the others through its parts by job, which share
// its binding.
type driver struct {
	binding
	path    string // the library that opened
	version int    // cuDriverGetVersion, for example 13000
	pins    hostPins

	streams streamCalls // streams, and the caller's events on them
	events  eventCalls  // events and their times
	pools   poolCalls   // stream-ordered memory pools
	raw     rawCalls    // raw driver loops the benchmarks compare with
}

// binding is the table of a loaded libcuda's entry points, which every
// part of a driver calls through.
type binding struct {
	api *C.dr_api
}

// streamCalls, eventCalls, poolCalls and rawCalls are the parts of a
// driver by job; each calls through the driver's binding.
type (
	streamCalls struct{ *binding }
	eventCalls  struct{ *binding }
	poolCalls   struct{ *binding }
	rawCalls    struct{ *binding }
)

// newDriver returns the driver of the library at path, loaded into api.
func newDriver(api *C.dr_api, path string) *driver {
	d := &driver{binding: binding{api: api}, path: path}
	b := &d.binding
	d.streams, d.events, d.pools, d.raw = streamCalls{b}, eventCalls{b}, poolCalls{b}, rawCalls{b}
	return d
}

// libcudaCandidates lists where libcuda is looked for, in order: the path in
// DAGRUN_LIBCUDA if set, the dynamic loader's search (ldconfig,
// LD_LIBRARY_PATH), then the folder where container runtimes mount it.
func libcudaCandidates(env string) []string {
	var c []string
	if env != "" {
		c = append(c, env)
	}
	return append(c, "libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1")
}

// openDriver loads libcuda from the first candidate that opens and
// initialises it. Errors match ErrNoDriver.
func openDriver(candidates []string) (*driver, error) {
	api := (*C.dr_api)(C.calloc(1, C.sizeof_dr_api))
	if api == nil {
		return nil, fmt.Errorf("%w: out of memory", ErrNoDriver)
	}
	var tried []string
	for _, p := range candidates {
		cp := C.CString(p)
		var why *C.char
		rc := C.dr_load(api, cp, &why)
		C.free(unsafe.Pointer(cp))
		switch rc {
		case 0:
			d := newDriver(api, p)
			if err := d.init(); err != nil {
				d.close()
				return nil, fmt.Errorf("%w: %s: %w", ErrNoDriver, p, err)
			}
			return d, nil
		case 1:
			tried = append(tried, fmt.Sprintf("%s lacks %s (driver too old: dagrun needs CUDA 12 or newer)", p, C.GoString(why)))
		default:
			tried = append(tried, C.GoString(why))
		}
	}
	C.free(unsafe.Pointer(api))
	return nil, fmt.Errorf("%w: %s (install the NVIDIA driver, or set DAGRUN_LIBCUDA to libcuda.so.1's path)",
		ErrNoDriver, strings.Join(tried, "; "))
}

func (d *driver) init() error {
	if err := d.check("cuInit", C.w_init(d.api)); err != nil {
		return err
	}
	var v C.int
	if err := d.check("cuDriverGetVersion", C.w_driver_version(d.api, &v)); err != nil {
		return err
	}
	d.version = int(v)
	var n C.int
	if err := d.check("cuDeviceGetCount", C.w_device_count(d.api, &n)); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the driver sees no CUDA device")
	}
	return nil
}

// close unloads the library. Nothing of it may be in use.
func (d *driver) close() {
	if d.api != nil {
		C.dr_unload(d.api)
		C.free(unsafe.Pointer(d.api))
		d.api = nil
	}
}

// check turns a CUresult into nil or an *Error naming call.
func (d *binding) check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r)}
	if s := C.w_error_name(d.api, r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.w_error_string(d.api, r); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

func (d *driver) deviceCount() (int, error) {
	var n C.int
	err := d.check("cuDeviceGetCount", C.w_device_count(d.api, &n))
	return int(n), err
}

// deviceInfo is what the backend needs to know of a device.
type deviceInfo struct {
	dev          C.CUdevice
	name         string
	major, minor int
}

func (d *driver) device(ordinal int) (deviceInfo, error) {
	var info deviceInfo
	if err := d.check("cuDeviceGet", C.w_device_get(d.api, &info.dev, C.int(ordinal))); err != nil {
		return info, err
	}
	var buf [256]C.char
	if err := d.check("cuDeviceGetName", C.w_device_name(d.api, &buf[0], C.int(len(buf)), info.dev)); err != nil {
		return info, err
	}
	info.name = C.GoString(&buf[0])
	var major, minor C.int
	if err := d.check("cuDeviceGetAttribute", C.w_device_attr(d.api, &major, C.DR_ATTR_CC_MAJOR, info.dev)); err != nil {
		return info, err
	}
	if err := d.check("cuDeviceGetAttribute", C.w_device_attr(d.api, &minor, C.DR_ATTR_CC_MINOR, info.dev)); err != nil {
		return info, err
	}
	info.major, info.minor = int(major), int(minor)
	return info, nil
}

func (d *driver) deviceAttr(dev C.CUdevice, attr C.int) (int, error) {
	var v C.int
	err := d.check("cuDeviceGetAttribute", C.w_device_attr(d.api, &v, attr, dev))
	return int(v), err
}

func (d *driver) retainPrimary(dev C.CUdevice) (C.CUcontext, error) {
	var c C.CUcontext
	err := d.check("cuDevicePrimaryCtxRetain", C.w_primary_retain(d.api, &c, dev))
	return c, err
}

func (d *driver) releasePrimary(dev C.CUdevice) error {
	return d.check("cuDevicePrimaryCtxRelease_v2", C.w_primary_release(d.api, dev))
}

// priorityRange returns the context's least (numerically largest) and
// greatest stream priorities.
func (d *driver) priorityRange(c C.CUcontext) (least, greatest int, err error) {
	var l, g C.int
	err = d.check("cuCtxGetStreamPriorityRange", C.w_priority_range(d.api, c, &l, &g))
	return int(l), int(g), err
}

func (d *driver) memInfo(c C.CUcontext) (free, total uint64, err error) {
	var f, t C.size_t
	err = d.check("cuMemGetInfo_v2", C.w_mem_info(d.api, c, &f, &t))
	return uint64(f), uint64(t), err
}

func (d *driver) ctxSync(c C.CUcontext) error {
	return d.check("cuCtxSynchronize", C.w_ctx_sync(d.api, c))
}

func (d streamCalls) create(c C.CUcontext, prio int) (C.CUstream, error) {
	var s C.CUstream
	err := d.check("cuStreamCreateWithPriority", C.w_stream_create(d.api, c, &s, C.int(prio)))
	return s, err
}

func (d streamCalls) destroy(c C.CUcontext, s C.CUstream) error {
	return d.check("cuStreamDestroy_v2", C.w_stream_destroy(d.api, c, s))
}

func (d streamCalls) sync(c C.CUcontext, s C.CUstream) error {
	return d.check("cuStreamSynchronize", C.dr_stream_sync(d.api, c, s))
}

func (d eventCalls) create(c C.CUcontext, timing bool) (C.CUevent, error) {
	var e C.CUevent
	flags := C.uint(C.DR_EVENT_DISABLE_TIMING)
	if timing {
		flags = C.DR_EVENT_DEFAULT
	}
	err := d.check("cuEventCreate", C.w_event_create(d.api, c, &e, flags))
	return e, err
}

func (d eventCalls) destroy(c C.CUcontext, e C.CUevent) error {
	return d.check("cuEventDestroy_v2", C.w_event_destroy(d.api, c, e))
}

// elapsedMany sets ms[i] to the time from origin to evs[i], all of context
// c, in one call. An event that can't be read gets NaN; the error is the
// first such one.
func (d eventCalls) elapsedMany(c C.CUcontext, origin C.CUevent, evs []C.CUevent, ms []float32) error {
	if len(evs) == 0 {
		return nil
	}
	var failed C.int
	err := d.check("cuEventElapsedTime", C.dr_elapsed_many(d.api, c, origin, &evs[0], C.int(len(evs)), (*C.float)(&ms[0]), &failed))
	if err != nil && failed >= 0 {
		err = &eventError{index: int(failed), err: err}
	}
	return err
}

// eventError is the error of reading the time of the index-th event of a batch.
type eventError struct {
	index int
	err   error
}

func (e *eventError) Error() string { return e.err.Error() }
func (e *eventError) Unwrap() error { return e.err }

func (d *driver) memAlloc(c C.CUcontext, n int64) (C.CUdeviceptr, error) {
	var p C.CUdeviceptr
	err := d.check("cuMemAlloc_v2", C.w_mem_alloc(d.api, c, &p, C.size_t(n)))
	return p, err
}

func (d *driver) memFree(c C.CUcontext, p C.CUdeviceptr) error {
	return d.check("cuMemFree_v2", C.w_mem_free(d.api, c, p))
}

// memHostAlloc is cuMemHostAlloc, portable and device-mapped; hostAlloc
// (hostpin.go) is what sessions call.
func (d *driver) memHostAlloc(c C.CUcontext, n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.check("cuMemHostAlloc", C.w_host_alloc(d.api, c, &p, C.size_t(n)))
	return p, err
}

func (d *driver) memFreeHost(c C.CUcontext, p unsafe.Pointer) error {
	return d.check("cuMemFreeHost", C.w_host_free(d.api, c, p))
}

// htod copies synchronously; src may be Go memory (the call keeps no pointer).
func (d *driver) htod(c C.CUcontext, dst C.CUdeviceptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.check("cuMemcpyHtoD_v2", C.w_htod(d.api, c, dst, unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

// dtoh copies synchronously into dst, which may be Go memory.
func (d *driver) dtoh(c C.CUcontext, dst []byte, src C.CUdeviceptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.check("cuMemcpyDtoH_v2", C.w_dtoh(d.api, c, unsafe.Pointer(&dst[0]), src, C.size_t(len(dst))))
}

func (d *driver) zero(c C.CUcontext, p C.CUdeviceptr, n int64) error {
	return d.check("cuMemsetD8_v2", C.w_memset8(d.api, c, p, C.size_t(n)))
}

// moduleLoad loads a PTX, cubin or fatbin image.
func (d *driver) moduleLoad(c C.CUcontext, image []byte) (C.CUmodule, error) {
	// PTX must end in a NUL byte; cubins and fatbins ignore the extra byte.
	cimg := C.malloc(C.size_t(len(image) + 1))
	if cimg == nil {
		return nil, &Error{Call: "cuModuleLoadData", Code: codeOutOfMemory, Name: "out of host memory"}
	}
	defer C.free(cimg)
	buf := unsafe.Slice((*byte)(cimg), len(image)+1)
	copy(buf, image)
	buf[len(image)] = 0
	var m C.CUmodule
	err := d.check("cuModuleLoadData", C.w_module_load(d.api, c, &m, cimg))
	return m, err
}

func (d *driver) moduleUnload(c C.CUcontext, m C.CUmodule) error {
	return d.check("cuModuleUnload", C.w_module_unload(d.api, c, m))
}

func (d *driver) function(c C.CUcontext, m C.CUmodule, name string) (C.CUfunction, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var f C.CUfunction
	if err := d.check("cuModuleGetFunction", C.w_module_function(d.api, c, &f, m, cn)); err != nil {
		return f, err
	}
	// Loaded now, when the session opens, not at the first launch or replay.
	return f, d.check("cuFuncLoad", C.w_func_load(d.api, c, f))
}

// setup returns the device's default memory pool, set to keep freed
// memory for reuse by later runs.
func (d poolCalls) setup(c C.CUcontext, dev C.CUdevice) (C.CUmemoryPool, error) {
	var p C.CUmemoryPool
	err := d.check("cuDeviceGetDefaultMemPool", C.w_pool_setup(d.api, c, dev, &p))
	return p, err
}

// trim returns the pool's unused memory to the device.
func (d poolCalls) trim(c C.CUcontext, p C.CUmemoryPool) error {
	return d.check("cuMemPoolTrimTo", C.w_pool_trim(d.api, c, p))
}
