// Hand-declared subset of CUPTI's activity API (CUPTI 2025.3, CUDA 13.0
// Update 1: CUPTI_API_VERSION 130001), loaded with dlopen at run time like
// the driver and NVRTC.
// The record layouts below declare only the fields dagrun reads, at the
// offsets cupti_activity.h gives them; cuda/testdata/cupti_check.c asserts
// every one against the real header on a machine that has it.
#ifndef DAGRUN_CUPTI_H
#define DAGRUN_CUPTI_H

#include <stddef.h>
#include <stdint.h>
#include "cuda.h"

typedef int dr_cupti_result;

enum {
	DR_CUPTI_SUCCESS = 0,
	DR_CUPTI_ERROR_NOT_INITIALIZED = 15,
	DR_CUPTI_ERROR_HARDWARE_BUSY = 26,
	DR_CUPTI_ERROR_NOT_SUPPORTED = 27,
	DR_CUPTI_ERROR_INSUFFICIENT_PRIVILEGES = 35,
	DR_CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED = 36,
	DR_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
	DR_CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES = 40,

	// CUpti_ActivityKind.
	DR_CUPTI_KIND_MEMCPY = 1,
	DR_CUPTI_KIND_MEMCPY2 = 22, // copies between devices (CUpti_ActivityMemcpyPtoP4)
	DR_CUPTI_KIND_MEMSET = 2,
	DR_CUPTI_KIND_KERNEL = 3, // serialises kernels: never enabled
	DR_CUPTI_KIND_CONCURRENT_KERNEL = 10,
	DR_CUPTI_KIND_EXTERNAL_CORRELATION = 39,
	DR_CUPTI_KIND_MEMORY_POOL = 50,
	DR_CUPTI_KIND_GRAPH_TRACE = 51,

	// CUpti_ExternalCorrelationKind: the one dagrun pushes op ids under.
	DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 3,

	// CUpti_CallbackId of the driver calls that submit work (cupti_driver_cbid.h):
	// API records, and so external correlation records, are enabled for these only.
	DR_CUPTI_CBID_cuMemsetD8Async = 216,
	DR_CUPTI_CBID_cuMemsetD16Async = 218,
	DR_CUPTI_CBID_cuMemsetD32Async = 220,
	DR_CUPTI_CBID_cuMemsetD8_v2 = 249,
	DR_CUPTI_CBID_cuMemcpyHtoD_v2 = 276,
	DR_CUPTI_CBID_cuMemcpyHtoDAsync_v2 = 277,
	DR_CUPTI_CBID_cuMemcpyDtoH_v2 = 278,
	DR_CUPTI_CBID_cuMemcpyDtoHAsync_v2 = 279,
	DR_CUPTI_CBID_cuMemcpyDtoDAsync_v2 = 281,
	DR_CUPTI_CBID_cuMemcpyAsync = 306,
	DR_CUPTI_CBID_cuLaunchKernel = 307,
	DR_CUPTI_CBID_cuMemcpyPeerAsync = 319,
	DR_CUPTI_CBID_cuGraphLaunch = 514,
	DR_CUPTI_CBID_cuLaunchHostFunc = 527,
	DR_CUPTI_CBID_cuMemAllocAsync = 598,
	DR_CUPTI_CBID_cuMemFreeAsync = 600,
	DR_CUPTI_CBID_cuLaunchKernelEx = 652,
	DR_CUPTI_MAX_CBIDS = 32,

	// The resource callback that reports a graph node cloned (by
	// instantiation): CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED.
	DR_CUPTI_CB_DOMAIN_RESOURCE = 3,
	DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED = 20,
	// A node created, by stream capture too, on the creating thread: with
	// the op pushed there, it names the captured node's op.
	DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED = 13,
	// Driver API callbacks (CUPTI_CB_DOMAIN_DRIVER_API) at entry
	// (CUPTI_API_ENTER): CUpti_CallbackData.callbackSite and correlationId,
	// the id of the launch that its kernel, copy and fill records carry.
	DR_CUPTI_CB_DOMAIN_DRIVER_API = 1,
	DR_CUPTI_API_ENTER = 0,
	DR_CUPTI_CALLBACKDATA_SITE = 0,
	DR_CUPTI_CALLBACKDATA_CORRELATION_ID = 64,
	// CUpti_ResourceData.resourceDescriptor, and in the CUpti_GraphData it
	// points to, node and originalNode.
	DR_CUPTI_RESOURCEDATA_DESCRIPTOR = 16,
	DR_CUPTI_GRAPHDATA_NODE = 16,
	DR_CUPTI_GRAPHDATA_ORIGINAL_NODE = 24,

	// CUpti_ActivityFlag.
	DR_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1,
	// CUpti_ActivityAttribute: the client hands CUPTI zeroed buffers (uint8_t).
	DR_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER = 5,

	// Offsets and sizes of the records read (bytes).
	DR_CUPTI_KERNEL10_SIZE = 216,
	DR_CUPTI_KERNEL10_START = 16,
	DR_CUPTI_KERNEL10_END = 24,
	DR_CUPTI_KERNEL10_DEVICE_ID = 40,
	DR_CUPTI_KERNEL10_CONTEXT_ID = 44,
	DR_CUPTI_KERNEL10_STREAM_ID = 48,
	DR_CUPTI_KERNEL10_CORRELATION_ID = 92,
	DR_CUPTI_KERNEL10_GRAPH_NODE_ID = 144,
	DR_CUPTI_KERNEL10_GRAPH_ID = 156,

	DR_CUPTI_MEMCPY6_SIZE = 96,
	DR_CUPTI_MEMCPY6_COPY_KIND = 4,
	DR_CUPTI_MEMCPY6_BYTES = 8,
	DR_CUPTI_MEMCPY6_START = 16,
	DR_CUPTI_MEMCPY6_END = 24,
	DR_CUPTI_MEMCPY6_DEVICE_ID = 32,
	DR_CUPTI_MEMCPY6_CONTEXT_ID = 36,
	DR_CUPTI_MEMCPY6_STREAM_ID = 40,
	DR_CUPTI_MEMCPY6_CORRELATION_ID = 44,
	DR_CUPTI_MEMCPY6_GRAPH_NODE_ID = 64,
	DR_CUPTI_MEMCPY6_GRAPH_ID = 72,

	DR_CUPTI_PTOP4_SIZE = 96,
	DR_CUPTI_PTOP4_COPY_KIND = 4,
	DR_CUPTI_PTOP4_BYTES = 8,
	DR_CUPTI_PTOP4_START = 16,
	DR_CUPTI_PTOP4_END = 24,
	DR_CUPTI_PTOP4_DEVICE_ID = 32,
	DR_CUPTI_PTOP4_CONTEXT_ID = 36,
	DR_CUPTI_PTOP4_STREAM_ID = 40,
	DR_CUPTI_PTOP4_CORRELATION_ID = 60,
	DR_CUPTI_PTOP4_GRAPH_NODE_ID = 72,
	DR_CUPTI_PTOP4_GRAPH_ID = 80,

	DR_CUPTI_MEMSET4_SIZE = 88,
	DR_CUPTI_MEMSET4_BYTES = 8,
	DR_CUPTI_MEMSET4_START = 16,
	DR_CUPTI_MEMSET4_END = 24,
	DR_CUPTI_MEMSET4_DEVICE_ID = 32,
	DR_CUPTI_MEMSET4_CONTEXT_ID = 36,
	DR_CUPTI_MEMSET4_STREAM_ID = 40,
	DR_CUPTI_MEMSET4_CORRELATION_ID = 44,
	DR_CUPTI_MEMSET4_GRAPH_NODE_ID = 64,
	DR_CUPTI_MEMSET4_GRAPH_ID = 72,

	DR_CUPTI_EXTCORR_SIZE = 24,
	DR_CUPTI_EXTCORR_EXTERNAL_KIND = 4,
	DR_CUPTI_EXTCORR_EXTERNAL_ID = 8,
	DR_CUPTI_EXTCORR_CORRELATION_ID = 16,

	DR_CUPTI_GRAPHTRACE2_SIZE = 56,
	DR_CUPTI_GRAPHTRACE2_CORRELATION_ID = 4,
	DR_CUPTI_GRAPHTRACE2_START = 8,
	DR_CUPTI_GRAPHTRACE2_END = 16,
	DR_CUPTI_GRAPHTRACE2_DEVICE_ID = 24,
	DR_CUPTI_GRAPHTRACE2_GRAPH_ID = 28,
	DR_CUPTI_GRAPHTRACE2_CONTEXT_ID = 32,
	DR_CUPTI_GRAPHTRACE2_STREAM_ID = 36,

	DR_CUPTI_MEMPOOL3_SIZE = 80,
	DR_CUPTI_MEMPOOL3_OPERATION_TYPE = 4,
	DR_CUPTI_MEMPOOL3_CORRELATION_ID = 12,
	DR_CUPTI_MEMPOOL3_DEVICE_ID = 20,
	DR_CUPTI_MEMPOOL3_SIZE_FIELD = 40,
	DR_CUPTI_MEMPOOL3_TIMESTAMP = 56,
	DR_CUPTI_MEMPOOL3_UTILIZED_SIZE = 64,
};

typedef void (*dr_cupti_request_fn)(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
typedef void (*dr_cupti_complete_fn)(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t size, size_t validSize);

typedef struct dr_cupti {
	void* lib;
	dr_cupti_result (*cuptiGetVersion)(uint32_t*);
	dr_cupti_result (*cuptiGetResultString)(dr_cupti_result, const char**);
	dr_cupti_result (*cuptiActivityRegisterCallbacks)(dr_cupti_request_fn, dr_cupti_complete_fn);
	dr_cupti_result (*cuptiActivityEnable)(int kind);
	dr_cupti_result (*cuptiActivityDisable)(int kind);
	dr_cupti_result (*cuptiActivityFlushAll)(uint32_t flag);
	dr_cupti_result (*cuptiActivityGetNextRecord)(uint8_t* buffer, size_t validSize, void** record);
	dr_cupti_result (*cuptiActivityGetNumDroppedRecords)(CUcontext ctx, uint32_t streamId, size_t* dropped);
	dr_cupti_result (*cuptiActivityPushExternalCorrelationId)(int kind, uint64_t id);
	dr_cupti_result (*cuptiActivityPopExternalCorrelationId)(int kind, uint64_t* lastId);
	dr_cupti_result (*cuptiGetTimestamp)(uint64_t*);
	dr_cupti_result (*cuptiFinalize)(void);
	dr_cupti_result (*cuptiActivityEnableDriverApi)(uint32_t cbid, uint8_t enable);
	dr_cupti_result (*cuptiGetGraphNodeId)(CUgraphNode node, uint64_t* id);
	dr_cupti_result (*cuptiSubscribe)(void** subscriber, void (*callback)(void*, int, uint32_t, const void*), void* userdata);
	dr_cupti_result (*cuptiUnsubscribe)(void* subscriber);
	dr_cupti_result (*cuptiEnableCallback)(uint32_t enable, void* subscriber, int domain, uint32_t cbid);
	dr_cupti_result (*cuptiActivitySetAttribute)(int attr, size_t* valueSize, void* value); // optional
	// external: ops are also named by CUPTI's external correlation records,
	// which need API records of the submitting calls and a push and pop of
	// the op into CUPTI around each; 0: by the driver callback alone, with
	// the op kept on a thread-local stack (set before dr_cupti_start).
	int external;
} dr_cupti;

// dr_cupti_rec is one activity record reduced to what dagrun reads. For an
// external correlation record, external holds the pushed id and correlation
// the launch it names; for a memory pool record start = end = its timestamp
// and bytes its pool's size.
typedef struct {
	uint32_t kind;
	uint32_t correlation;
	uint64_t external;
	uint64_t start, end;
	uint64_t graphNodeId;
	uint32_t graphId;
	uint32_t device, context, stream;
	uint64_t bytes;
	uint32_t sub; // CUpti_ActivityMemcpyKind, or CUpti_ActivityMemoryPoolOperationType
	uint32_t pad;
} dr_cupti_rec;

int dr_cupti_load(dr_cupti* c, const char* path, const char** missing);
void dr_cupti_unload(dr_cupti* c);

// dr_cupti_start registers the buffer callbacks and enables kinds[0..n),
// setting enabled[i]: the first nrequired must enable, the others may fail
// (a kind this device or CUPTI does not give). Then, with c->external, it
// enables API records of the driver calls cbids[0..ncbids) (at most
// DR_CUPTI_MAX_CBIDS): CUPTI writes an external correlation record only
// beside an API record. Last it subscribes to the driver callbacks of
// cbids and to graph node clones, so that records of a replay, which name
// the instantiated graph's nodes, can be traced to the captured ones. CUPTI hands buffers to
// process-wide callbacks with no user data, so one tracer at a time owns the
// sink; a second gets -1. On an error, *failed names the call (and *kind the
// kind) and the kinds enabled so far are disabled again.
dr_cupti_result dr_cupti_start(dr_cupti* c, const int* kinds, int nrequired, int n, int* enabled,
                               const uint32_t* cbids, int ncbids, size_t bufsize, const char** failed, int* kind);
// dr_cupti_take flushes CUPTI (forced when force is set) and moves the records
// parsed so far into *out (malloc'd, *n of them; the caller frees it), the
// graph node clones seen into *clones (malloc'd pairs of node ids, clone then
// original, *nclones pairs; the caller frees it), the launches named by an op
// into *links (malloc'd pairs: correlation id, op id; *nlinks pairs), the
// graph nodes created while an op was pushed into *nodes (malloc'd pairs:
// node id, op id; *nnodes pairs), the
// count of records CUPTI dropped, and of records lost because dagrun could
// not allocate a buffer or room to keep them.
dr_cupti_result dr_cupti_take(dr_cupti* c, int force, dr_cupti_rec** out, size_t* n, uint64_t** clones, size_t* nclones,
                              uint64_t** links, size_t* nlinks, uint64_t** nodes, size_t* nnodes, uint64_t* dropped,
                              uint64_t* lost);
// dr_cupti_switch enables (on != 0) or disables the n kinds, all of them
// whatever fails; the first failure is returned.
dr_cupti_result dr_cupti_switch(dr_cupti* c, const int* kinds, int n, int on);
// dr_cupti_stop disables the kinds and API records, frees what was not taken, and
// gives the sink up.
dr_cupti_result dr_cupti_stop(dr_cupti* c, const int* kinds, int n);

// dr_cupti_drop is one buffer that CUPTI said records were dropped beside:
// the context and stream its completion callback named (CUPTI documents
// both as always NULL and 0 since CUDA 6), the count cuptiActivityGetNumDroppedRecords
// returned then, the buffer's valid bytes and the records parsed from it,
// and how many buffers this tracer had completed before it.
typedef struct {
	uint64_t ctx;
	uint32_t stream;
	uint32_t records;
	uint64_t dropped;
	uint64_t valid;
	uint64_t seq;
} dr_cupti_drop;

#define DR_CUPTI_MAX_DROPS 8

// dr_cupti_stats is what the sink counted since the tracer started, for
// diagnosing missing records: CUPTI's dropped count and dagrun's own
// losses apart, the count drained at the start (dropped before this
// tracer: CUPTI keeps counting between tracers, while no buffer is given),
// the buffers completed while the tracer held the sink and those completed
// with no tracer (freed unread), buffer requests declined, and the first
// DR_CUPTI_MAX_DROPS buffers with a dropped count; and how buffers were
// given.
typedef struct {
	uint64_t dropped, lost, dropped_before;
	uint64_t buffers, idle_buffers, declined, declined_before;
	// requests CUPTI made for buffers, fresh: those given a newly
	// allocated one (not a spare); zeroed: CUPTI takes the sink's buffers as
	// zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER was accepted).
	uint64_t requests, fresh;
	uint32_t zeroed;
	uint32_t ndrops;
	dr_cupti_drop drops[DR_CUPTI_MAX_DROPS];
} dr_cupti_stats;

// dr_cupti_get_stats copies the sink's counts since the tracer started.
void dr_cupti_get_stats(dr_cupti_stats* out);

// dr_cupti_graph_launch launches e on s with marker pushed around the
// launch (dr_cupti_push, dr_graph_launch, dr_cupti_pop in one call, so on
// one thread): the driver callback pairs the launch's correlation id with
// marker, which every kernel, copy and fill record of the replay carries.
// *cupti_failed is set when the push or the pop failed (the launch's
// result is returned either way).
CUresult dr_cupti_graph_launch(dr_cupti* c, dr_api* a, CUcontext ctx, CUgraphExec e, CUstream s, uint64_t marker,
                               int* cupti_failed);
// dr_cupti_push names op id as the submitter of what the calling thread
// submits until dr_cupti_pop: a thread-local op that the driver API
// callback pairs with each submitting call's correlation id at its entry,
// and with c->external CUPTI's external correlation stack too (records of
// kind EXTERNAL_CORRELATION). The first needs no API activity records: the
// kernel, copy and fill records carry the same correlation id as the call
// that submitted them (for a graph replay, the cuGraphLaunch's).
dr_cupti_result dr_cupti_push(dr_cupti* c, uint64_t id);
dr_cupti_result dr_cupti_pop(dr_cupti* c);
// dr_cupti_graph_node_id is the id CUPTI gives node in activity records
// (graphNodeId): how a captured op is found in a replay's records.
dr_cupti_result dr_cupti_graph_node_id(dr_cupti* c, CUgraphNode node, uint64_t* id);

#endif
