// Hand-declared subset of the CUDA driver API and NVRTC, loaded with dlopen
// at run time: dagrun builds without the CUDA SDK. Every driver entry point
// is reached through a function pointer of a dr_api table; the dr_* wrappers
// make the calling thread's current context the one named before the call,
// so that one cgo call does one driver call on whatever OS thread Go runs it.
#ifndef DAGRUN_CUDA_H
#define DAGRUN_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef void (*CUhostFn)(void* userData);

enum {
	DR_SUCCESS = 0,
	DR_ERROR_NOT_READY = 600,
	DR_ERROR_NOT_FOUND = 500,
	DR_ERROR_LIBRARY = 999, // CUDA_ERROR_UNKNOWN: dr_submit's report of a library call's failure
	DR_STREAM_NON_BLOCKING = 1,
	DR_EVENT_DEFAULT = 0,
	DR_EVENT_DISABLE_TIMING = 2,
	DR_MEMHOSTALLOC_PORTABLE = 1,
	DR_MEMHOSTALLOC_DEVICEMAP = 2,
	DR_ATTR_HOST_POINTER_FOR_REGISTERED_MEM = 91,
	DR_ATTR_CC_MAJOR = 75,
	DR_ATTR_CC_MINOR = 76,
	DR_ATTR_MEMORY_POOLS_SUPPORTED = 115,
	DR_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
	// CUmemPool_attribute (cuuint64_t values): the memory the pool holds
	// (RESERVED) and the bytes it has handed out and not had back (USED),
	// each with a high-water mark that setting 0 resets.
	DR_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
	DR_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
	DR_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
	DR_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
	// CUgraphMem_attribute: the same of the graph allocator, which graphs'
	// memory nodes draw on instead of the pool.
	DR_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
	DR_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
	DR_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
	DR_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
	DR_STREAM_CAPTURE_MODE_GLOBAL = 0,
	DR_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	DR_STREAM_CAPTURE_MODE_RELAXED = 2,
	DR_GRAPH_INSTANTIATE_USE_NODE_PRIORITY = 8,
	DR_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
};

// Kernel node parameters of cuGraphExecKernelNodeSetParams (CUDA_KERNEL_NODE_PARAMS, v1 layout).
typedef struct {
	CUfunction func;
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	void** kernelParams;
	void** extra;
} dr_kernel_node_params;

// CUDA_KERNEL_NODE_PARAMS_v2: the v1 layout and two more fields, which
// v1 entry points do not read.
typedef struct {
	dr_kernel_node_params v1;
	void* kern;
	CUcontext ctx;
} dr_kernel_node_params_v2;

// CUgraphExecUpdateResultInfo, filled by cuGraphExecUpdate_v2.
typedef struct {
	int result; // CUgraphExecUpdateResult: 0 success, else why the update was refused
	CUgraphNode errorNode;
	CUgraphNode errorFromNode;
} dr_exec_update_info;

// Programmatic dependent launch (cuLaunchKernelEx, CUDA 11.8; under stream
// capture, CUDA 12.3). CUlaunchAttribute is an id (CUlaunchAttributeID, 4
// bytes), 4 bytes of padding and a 64-byte union of values, 8-aligned: 72
// bytes, the value at 8. CUlaunchConfig is the six dimensions and the
// shared bytes (7 x 4 = 28 bytes, padded to 32), the stream at 32, the
// attributes at 40 and their count at 48: 56 bytes. pdlBinding (pdl.go)
// lists these for the tests that check them.
enum {
	DR_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};

typedef struct {
	int id; // CUlaunchAttributeID
	char pad[4];
	union {
		char raw[64];
		int programmaticStreamSerializationAllowed; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
		void* align;                                // the union holds pointers (events): 8-aligned
	} value;
} dr_launch_attr;

typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	dr_launch_attr* attrs;
	unsigned int numAttrs;
} dr_launch_config;

// CUmemAccessDesc: a location (type, id) and the access flags it gets.
typedef struct {
	int locationType; // CU_MEM_LOCATION_TYPE_DEVICE = 1
	int locationId;   // the device ordinal
	int flags;        // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
} dr_mem_access_desc;

typedef struct dr_api {
	void* lib;
	// Initialisation, devices and contexts.
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDriverGetVersion)(int*);
	CUresult (*cuDeviceGetCount)(int*);
	CUresult (*cuDeviceGet)(CUdevice*, int);
	CUresult (*cuDeviceGetName)(char*, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxGetCurrent)(CUcontext*);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuCtxGetStreamPriorityRange)(int*, int*);
	CUresult (*cuMemGetInfo)(size_t*, size_t*);
	CUresult (*cuGetErrorName)(CUresult, const char**);
	CUresult (*cuGetErrorString)(CUresult, const char**);
	// Streams and events.
	CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned int, int);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuStreamQuery)(CUstream);
	CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*cuEventCreate)(CUevent*, unsigned int);
	CUresult (*cuEventDestroy)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
	// Memory.
	CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
	CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
	CUresult (*cuMemHostAlloc)(void**, size_t, unsigned int);
	CUresult (*cuMemFreeHost)(void*);
	CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
	CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, int, void*);
	CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
	CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
	CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
	CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
	// 2-D memsets: pitch in bytes, width in elements (memset2d.go).
	CUresult (*cuMemsetD2D8Async)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
	CUresult (*cuMemsetD2D16Async)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
	CUresult (*cuMemsetD2D32Async)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
	// Modules and launches.
	CUresult (*cuModuleLoadData)(CUmodule*, const void*);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
	                           unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
	CUresult (*cuLaunchHostFunc)(CUstream, CUhostFn, void*);
	// Launches with attributes (optional: CUDA 11.8), for programmatic
	// dependent launch.
	CUresult (*cuLaunchKernelEx)(const dr_launch_config*, CUfunction, void**, void**);
	// Graphs (optional: NULL where the driver lacks them).
	CUresult (*cuStreamBeginCapture)(CUstream, int);
	CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
	CUresult (*cuStreamIsCapturing)(CUstream, int*);
	CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
	CUresult (*cuGraphUpload)(CUgraphExec, CUstream);
	CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
	CUresult (*cuGraphExecDestroy)(CUgraphExec);
	CUresult (*cuGraphDestroy)(CUgraph);
	CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode*, size_t*);
	CUresult (*cuGraphNodeGetType)(CUgraphNode, int*);
	CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const dr_kernel_node_params*);
	CUresult (*cuGraphExecUpdateV2)(CUgraphExec, CUgraph, dr_exec_update_info*);     // CUDA 12: cuGraphExecUpdate_v2
	CUresult (*cuGraphExecUpdateV1)(CUgraphExec, CUgraph, CUgraphNode*, int*);        // CUDA 11: cuGraphExecUpdate
	CUresult (*cuGraphCreate)(CUgraph*, unsigned int);
	CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const dr_kernel_node_params_v2*);
	// Peer access (optional; see peer.go).
	CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice);
	CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned int);
	CUresult (*cuMemPoolSetAccess)(CUmemoryPool, const dr_mem_access_desc*, size_t);
	// Eager function loading under lazy module loading (optional: cuFuncLoad
	// is CUDA 12.4's; cuFuncGetAttribute loads a function too).
	CUresult (*cuFuncLoad)(CUfunction);
	CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
	// Memory use of the pool and the graph allocator (optional: without
	// them the pool's temporaries are not measured; see poolwatch.go).
	CUresult (*cuMemPoolGetAttribute)(CUmemoryPool, int, void*);
	CUresult (*cuDeviceGetGraphMemAttribute)(CUdevice, int, void*);
	CUresult (*cuDeviceSetGraphMemAttribute)(CUdevice, int, void*);
	// Conditional nodes (optional: CUDA 12.4; IF with an else body, 12.8).
	// Each slot takes the symbol of the signature declared here, the oldest
	// that has it: the driver keeps exporting those for older programs.
	CUresult (*cuStreamGetCaptureInfo)(CUstream, int*, uint64_t*, CUgraph*, const CUgraphNode**, size_t*); // _v2
	CUresult (*cuStreamUpdateCaptureDependencies)(CUstream, CUgraphNode*, size_t, unsigned int);
	CUresult (*cuStreamBeginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode*, const void*, size_t, int);
	CUresult (*cuGraphConditionalHandleCreate)(uint64_t*, CUgraph, CUcontext, unsigned int, unsigned int);
	CUresult (*cuGraphAddNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, void*);
	// Pinning memory of dagrun's own (optional: hostpin.go).
	CUresult (*cuMemHostRegister)(void*, size_t, unsigned int);
	CUresult (*cuMemHostUnregister)(void*);
	// Stream memory operations (optional): the flags of copy collectives
	// (copycoll.go).
	CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);
	CUresult (*cuStreamWriteValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);
} dr_api;

// dr_load opens libcuda and fills a; it returns 0, or 1 with *missing set to
// the name of a required symbol the library lacks, or -1 when no library
// opened (dlerror text in *missing).
int dr_load(dr_api* a, const char* path, const char** missing);
void dr_unload(dr_api* a);

// Launch parameters kept in C memory for the whole life of an op: params[i]
// points at slots[i], which holds the i-th argument's bytes.
// early: launch with programmatic stream serialization, so that the
// kernel may start while the kernel before it on the stream still runs
// (the session sets it only where the driver and device have it and the
// kernel waits for its producer: pdl.go).
typedef struct {
	CUfunction f;
	unsigned int gx, gy, gz, bx, by, bz, shared;
	int nslots;
	void** params;
	uint64_t* slots;
	int early;
} dr_launch;

dr_launch* dr_launch_new(int nslots);
// dr_launch_on launches l on s, its context current: with cuLaunchKernelEx
// and programmatic stream serialization when l->early and the driver has
// it, else with cuLaunchKernel.
CUresult dr_launch_on(dr_api* a, const dr_launch* l, CUstream s);
// dr_launch_ex_supported reports whether the driver has cuLaunchKernelEx.
int dr_launch_ex_supported(dr_api* a);

// Host-side work run in stream order from a driver thread (pure C: no Go, no CUDA).
typedef struct {
	int kind; // 0 copy, 1 fill
	void* dst;
	const void* src;
	size_t n;           // bytes to copy, or elements to fill
	unsigned char pat[8];
	int patlen;
} dr_hostwork;

CUresult dr_ctx(dr_api* a, CUcontext c);
CUresult dr_launch_kernel(dr_api* a, CUcontext c, dr_launch* l, CUstream s);
CUresult dr_record(dr_api* a, CUcontext c, CUevent e, CUstream s);
CUresult dr_wait(dr_api* a, CUcontext c, CUstream s, CUevent e);
CUresult dr_alloc_async(dr_api* a, CUcontext c, CUdeviceptr* p, size_t n, CUstream s);
CUresult dr_free_async(dr_api* a, CUcontext c, CUdeviceptr p, CUstream s);
CUresult dr_htod_async(dr_api* a, CUcontext c, CUdeviceptr d, const void* h, size_t n, CUstream s);
CUresult dr_dtoh_async(dr_api* a, CUcontext c, void* h, CUdeviceptr d, size_t n, CUstream s);
CUresult dr_dtod_async(dr_api* a, CUcontext c, CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s);
CUresult dr_copy_async(dr_api* a, CUcontext c, CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s);
CUresult dr_staged_copy(dr_api* a, CUcontext c, CUstream s, CUcontext hc, CUstream hs, int down, CUdeviceptr dst, CUdeviceptr src,
                        size_t n, void* stage, size_t chunk, int slots, CUevent start, CUevent* full, CUevent* empty, CUevent done);
CUresult dr_memset_async(dr_api* a, CUcontext c, CUdeviceptr d, int elemsize, uint64_t pattern, size_t n, CUstream s);
CUresult dr_hostwork_launch(dr_api* a, CUcontext c, dr_hostwork* w, CUstream s);
CUresult dr_hostfunc_launch(dr_api* a, CUcontext c, uintptr_t handle, CUstream s);
CUresult dr_stream_sync(dr_api* a, CUcontext c, CUstream s);
CUresult dr_stream_query(dr_api* a, CUcontext c, CUstream s);
// dr_elapsed_many sets ms[i] to the milliseconds from origin to evs[i], for
// n events of one context, in one crossing from Go. An event whose time
// can't be read gets NaN; the first such error is returned and its index
// put in *failed.
CUresult dr_elapsed_many(dr_api* a, CUcontext c, CUevent origin, const CUevent* evs, int n, float* ms, int* failed);

// NVRTC, loaded the same way.
typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;

typedef struct {
	void* lib;
	const char* (*nvrtcGetErrorString)(nvrtcResult);
	nvrtcResult (*nvrtcVersion)(int*, int*);
	nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
	nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
	nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
	nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
	nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
	nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
	nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
	nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
	nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
} dr_nvrtc;

int dr_nvrtc_load(dr_nvrtc* n, const char* path, const char** missing);
void dr_nvrtc_unload(dr_nvrtc* n);

// dr_nvrtc_compile compiles src; on return *out (malloc'd) holds the cubin
// (cubin != 0) or PTX and *log (malloc'd, may be NULL) the compiler's log.
// *step names the NVRTC call that failed.
nvrtcResult dr_nvrtc_compile(dr_nvrtc* n, const char* src, const char* name, int nopt, const char** opts,
                             int cubin, char** out, size_t* outlen, char** log, const char** step);



// Raw driver loops, the floor that benchmarks compare the backend with:
// rounds x nstreams launches of l, breadth first, then a context sync;
// and n event record + stream wait pairs.
CUresult dr_raw_launches(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds, int sync);
// Graphs. dr_capture_begin starts a relaxed-mode capture on s (relaxed:
// the driver calls of one capture may come from several OS threads, as cgo
// calls of one goroutine do). dr_graph_instantiate instantiates g with the
// streams' priorities kept per kernel node, falling back to no flags on
// drivers that refuse that flag, and uploads it on s, waiting for the
// upload. dr_graph_exec_update applies g to e in place; *why is the
// driver's CUgraphExecUpdateResult when it refuses (0 otherwise).
CUresult dr_capture_begin(dr_api* a, CUcontext c, CUstream s);
// Conditional nodes (control.go). dr_cond_handle makes a handle in the
// graph s is capturing into; dr_cond_node adds a conditional node of type
// (0 IF, 1 WHILE) with size bodies after what s captured so far, makes s's
// next work follow it and returns its body graphs; dr_capture_to_graph
// starts capturing s into body graph g.
int dr_cond_supported(dr_api* a);
CUresult dr_cond_handle(dr_api* a, CUcontext c, CUstream s, uint64_t* h);
CUresult dr_cond_node(dr_api* a, CUcontext c, CUstream s, uint64_t h, int type, int size, CUgraph* bodies);
CUresult dr_capture_to_graph(dr_api* a, CUcontext c, CUstream s, CUgraph g);
CUresult dr_capture_end(dr_api* a, CUcontext c, CUstream s, CUgraph* g);
CUresult dr_graph_instantiate(dr_api* a, CUcontext c, CUgraphExec* e, CUgraph g, CUstream s);
CUresult dr_graph_launch(dr_api* a, CUcontext c, CUgraphExec e, CUstream s);
CUresult dr_graph_exec_update(dr_api* a, CUcontext c, CUgraphExec e, CUgraph g, int* why);
CUresult dr_graph_exec_destroy(dr_api* a, CUcontext c, CUgraphExec e);
CUresult dr_graph_destroy(dr_api* a, CUcontext c, CUgraph g);
CUresult dr_graph_node_count(dr_api* a, CUcontext c, CUgraph g, size_t* n);

// dr_raw_graph captures rounds x nstreams launches of l, breadth first,
// forked from and joined back to streams[0] with event e: the graph the
// benchmarks compare dagrun's captured plans with.
CUresult dr_raw_graph(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds, CUevent e, CUgraph* g);
// dr_raw_graph_explicit builds the same work node by node
// (cuGraphAddKernelNode): nstreams chains of rounds launches.
CUresult dr_raw_graph_explicit(dr_api* a, CUcontext c, dr_launch* l, int nchains, int rounds, CUgraph* g);
// dr_raw_graph_launches launches e n times on s, then synchronises s.
CUresult dr_raw_graph_launches(dr_api* a, CUcontext c, CUgraphExec e, CUstream s, int n);

CUresult dr_raw_record_wait(dr_api* a, CUcontext c, CUevent e, CUstream from, CUstream to, int n);
CUresult dr_raw_timed_launches(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds,
                               CUevent* evs, int per, float* ms, int read);
// dr_raw_session_open does what a session's Open and stream/event creation
// do, with no plan: nstreams non-blocking streams of priority prio, nevents
// events without timing, and nbufs buffers of sizes[i] bytes placed by
// kinds[i] (0 device memory, zeroed; 1 pinned host, 2 pageable host, both
// zeroed). On failure it releases what it made.
CUresult dr_raw_session_open(dr_api* a, CUcontext c, CUstream* streams, int nstreams, int prio, CUevent* events, int nevents,
                             void** bufs, const size_t* sizes, const int* kinds, int nbufs);
// dr_raw_session_close releases what dr_raw_session_open made.
CUresult dr_raw_session_close(dr_api* a, CUcontext c, CUstream* streams, int nstreams, CUevent* events, int nevents,
                              void** bufs, const int* kinds, int nbufs);

// A plain submission step, enqueued from C with others in one crossing
// (dr_submit): a kernel launch, a fill, a copy between device memory and
// device or page-locked memory, an event record, a stream wait or a
// cuBLASLt GEMM.
enum {
	DR_STEP_LAUNCH = 0,
	DR_STEP_MEMSET = 1,
	DR_STEP_HTOD = 2,
	DR_STEP_DTOH = 3,
	DR_STEP_DTOD = 4,
	DR_STEP_RECORD = 5,
	DR_STEP_WAIT = 6,
	DR_STEP_GEMM = 7,
};

typedef struct {
	int kind;
	int esize; // DR_STEP_MEMSET: bytes per element
	CUcontext ctx;
	CUstream s;
	dr_launch* l;     // DR_STEP_LAUNCH
	CUevent e;        // DR_STEP_RECORD, DR_STEP_WAIT
	CUdeviceptr d;    // the device side of a fill or copy (the destination of a device copy)
	CUdeviceptr src;  // DR_STEP_DTOD
	void* host;       // DR_STEP_HTOD, DR_STEP_DTOH: page-locked memory
	size_t n;         // bytes of a copy, elements of a fill
	uint64_t fill;    // DR_STEP_MEMSET
	int64_t op;       // the op pushed to CUPTI around the call (see dr_submit); -1 for none
	struct dr_lt* lt;      // DR_STEP_GEMM: cuBLASLt,
	struct dr_gemm* gemm;  // the GEMM, and its operands x and y (c is src, d is d)
	CUdeviceptr x, y, bias; // bias: of a bias epilogue, else 0
} dr_step;

struct dr_cupti;
struct dr_lt;
struct dr_gemm;

// dr_gemm_enqueue is one cuBLASLt call of g on s (cublas.c), its status
// returned; the context must be current.
int dr_gemm_enqueue(struct dr_lt* l, struct dr_gemm* g, CUdeviceptr x, CUdeviceptr y, CUdeviceptr c, CUdeviceptr d,
                    CUdeviceptr bias, CUstream s);

// dr_submit enqueues steps[0..n) in order, each as its own dr_ call would,
// making each step's context current when it is not. With t not NULL, a
// step's op (when not -1) is pushed to CUPTI around its call
// (dr_cupti_push). *done is how many steps were enqueued: n, or the index
// of the step whose failed result is returned; a GEMM step's failure is
// DR_ERROR_LIBRARY with cuBLASLt's status in *lib_status. *cupti_failed
// is set when a push or pop failed (the call is made all the same).
CUresult dr_submit(dr_api* a, const dr_step* steps, int n, struct dr_cupti* t, int* done, int* cupti_failed,
                   int* lib_status);

#endif
