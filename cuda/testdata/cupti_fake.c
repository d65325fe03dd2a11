// A stand-in for libcupti.so.13 that lets TestCUPTIFake drive the binding's
// C and Go plumbing on a machine without CUPTI: buffer callbacks, record
// parsing, correlation, dropped counts, version and busy refusals. Each push
// of an external id queues a correlation record and a kernel record naming
// it (a kernel launched under the op), written at the offsets cupti.h
// declares: the layouts themselves are checked by cupti_check.c.
// FAKE_CUPTI selects behaviour: "old" reports version 120000; "busy" refuses
// cuptiActivityEnable with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
// "callbacks" writes no external correlation records but calls the driver
// API callback at the entry of each (pretended) launch with its correlation
// id, the way a CUPTI whose external correlation records do not come names
// launches only through the callback; "nodes" neither: it reports a graph
// node created under each push (as a stream capture would) and a kernel
// record of that node, which only the node's op can name; "replays" reports
// a node made under each push of an op id (a capture), and for each push of
// a replay marker (an id from 1<<62: a graph launch) a correlation record
// and one kernel record per node made so far, replay r's node i running
// from 10000*(r+1) + 100*i for 50 ns; "graphs" reports, for each push of
// a replay marker, a graph-launch record only (as a whole-graph tracer
// gets), replay r running from 10000*(r+1) for 5000 ns, named by the driver
// callback of cuGraphLaunch alone (no correlation record), and nothing for
// a push of an op id. Each registration
// of the buffer callbacks starts a tracer: its first flush with records
// reports 3 dropped; "predropped" also pretends 5 were dropped before it
// (while no tracer gave buffers), which the tracer drains at its start;
// "partial" keeps the last kernel record back from a default flush, for a
// forced one.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DAGRUN_CUDA_H
typedef int CUresult;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct dr_api dr_api;
#include "../cupti.h"

typedef void (*req_fn)(uint8_t**, size_t*, size_t*);
typedef void (*done_fn)(CUcontext, uint32_t, uint8_t*, size_t, size_t);

static req_fn requested;
static done_fn completed;
static uint64_t stack[16];
static int depth;
static uint8_t pending[1 << 16];
static size_t npending;
static uint32_t corr = 1;
static size_t dropped_pending;
static uint64_t made[16]; // "replays": the nodes made so far
static int nmade;
static int dropped_reported; // this tracer's first flush with records has reported its drops

static int mode(const char* m) {
	const char* v = getenv("FAKE_CUPTI");
	return v != NULL && strcmp(v, m) == 0;
}

static void put32(uint8_t* r, size_t off, uint32_t v) { memcpy(r + off, &v, 4); }
static void put64(uint8_t* r, size_t off, uint64_t v) { memcpy(r + off, &v, 8); }

int cuptiGetVersion(uint32_t* v) { *v = mode("old") ? 120000 : 130001; return 0; }
int cuptiGetResultString(int r, const char** s) {
	*s = r == DR_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "fake: another subscriber" : "fake error";
	return 0;
}
int cuptiActivityRegisterCallbacks(req_fn r, done_fn d) {
	requested = r;
	completed = d;
	dropped_reported = 0;
	nmade = 0;
	if (mode("predropped")) dropped_pending += 5;
	return 0;
}
int cuptiActivityEnable(int kind) {
	(void)kind;
	return mode("busy") ? DR_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED : 0;
}
int cuptiActivityDisable(int kind) { (void)kind; return 0; }
int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t on) { (void)cbid; (void)on; return 0; }
int cuptiGetGraphNodeId(CUgraphNode n, uint64_t* id) { *id = (uint64_t)(uintptr_t)n; return 0; }
typedef void (*callback_fn)(void*, int, uint32_t, const void*);
static callback_fn subscribed;
static int launch_callback_on, graph_callback_on, node_callback_on;
int cuptiSubscribe(void** s, callback_fn cb, void* u) { (void)u; subscribed = cb; *s = (void*)1; return 0; }
int cuptiUnsubscribe(void* s) { (void)s; subscribed = NULL; launch_callback_on = graph_callback_on = node_callback_on = 0; return 0; }
int cuptiEnableCallback(uint32_t e, void* s, int d, uint32_t c) {
	(void)s;
	if (d == DR_CUPTI_CB_DOMAIN_DRIVER_API && c == DR_CUPTI_CBID_cuLaunchKernel) launch_callback_on = (int)e;
	if (d == DR_CUPTI_CB_DOMAIN_DRIVER_API && c == DR_CUPTI_CBID_cuGraphLaunch) graph_callback_on = (int)e;
	if (d == DR_CUPTI_CB_DOMAIN_RESOURCE && c == DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) node_callback_on = (int)e;
	return 0;
}
int cuptiGetTimestamp(uint64_t* t) { *t = 42; return 0; }

// The client's word that its buffers come zeroed: then a buffer that does
// not is refused at the flush (error 9), where CUPTI would read garbage.
static int zeroed_buffers;
int cuptiActivitySetAttribute(int attr, size_t* size, void* value) {
	if (attr != DR_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER || *size != 1) return 1;
	zeroed_buffers = *(uint8_t*)value != 0;
	return 0;
}
int cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t* n) {
	(void)c; (void)s;
	*n = dropped_pending;
	dropped_pending = 0;
	return 0;
}

static size_t record_size(const uint8_t* r) {
	uint32_t kind;
	memcpy(&kind, r, 4);
	switch (kind) {
	case DR_CUPTI_KIND_CONCURRENT_KERNEL: return DR_CUPTI_KERNEL10_SIZE;
	case DR_CUPTI_KIND_EXTERNAL_CORRELATION: return DR_CUPTI_EXTCORR_SIZE;
	case DR_CUPTI_KIND_MEMCPY: return DR_CUPTI_MEMCPY6_SIZE;
	case DR_CUPTI_KIND_GRAPH_TRACE: return DR_CUPTI_GRAPHTRACE2_SIZE;
	}
	return 0;
}

int cuptiActivityGetNextRecord(uint8_t* buf, size_t valid, void** rec) {
	uint8_t* p = *rec == NULL ? buf : (uint8_t*)*rec + record_size(*rec);
	if (p >= buf + valid) return 12; // CUPTI_ERROR_MAX_LIMIT_REACHED
	*rec = p;
	return 0;
}

static void node_made(uint64_t node) {
	if (subscribed != NULL && node_callback_on) {
		uint8_t graph[64], res[24];
		memset(graph, 0, sizeof graph);
		memset(res, 0, sizeof res);
		put64(graph, DR_CUPTI_GRAPHDATA_NODE, node);
		void* desc = graph;
		memcpy(res + DR_CUPTI_RESOURCEDATA_DESCRIPTOR, &desc, sizeof desc);
		subscribed(NULL, DR_CUPTI_CB_DOMAIN_RESOURCE, DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, res);
	}
}

static void put_kernel(uint64_t start, uint64_t end, uint64_t node) {
	uint8_t* k = pending + npending;
	memset(k, 0, DR_CUPTI_KERNEL10_SIZE);
	put32(k, 0, DR_CUPTI_KIND_CONCURRENT_KERNEL);
	put64(k, DR_CUPTI_KERNEL10_START, start);
	put64(k, DR_CUPTI_KERNEL10_END, end);
	put32(k, DR_CUPTI_KERNEL10_DEVICE_ID, 0);
	put32(k, DR_CUPTI_KERNEL10_STREAM_ID, 7);
	put32(k, DR_CUPTI_KERNEL10_CORRELATION_ID, corr);
	put64(k, DR_CUPTI_KERNEL10_GRAPH_NODE_ID, node);
	npending += DR_CUPTI_KERNEL10_SIZE;
}

static void put_graph_launch(uint64_t start, uint64_t end) {
	uint8_t* g = pending + npending;
	memset(g, 0, DR_CUPTI_GRAPHTRACE2_SIZE);
	put32(g, 0, DR_CUPTI_KIND_GRAPH_TRACE);
	put32(g, DR_CUPTI_GRAPHTRACE2_CORRELATION_ID, corr);
	put64(g, DR_CUPTI_GRAPHTRACE2_START, start);
	put64(g, DR_CUPTI_GRAPHTRACE2_END, end);
	put32(g, DR_CUPTI_GRAPHTRACE2_GRAPH_ID, 9);
	put32(g, DR_CUPTI_GRAPHTRACE2_STREAM_ID, 7);
	npending += DR_CUPTI_GRAPHTRACE2_SIZE;
}

static void put_correlation(uint64_t id) {
	uint8_t* e = pending + npending;
	memset(e, 0, DR_CUPTI_EXTCORR_SIZE);
	put32(e, 0, DR_CUPTI_KIND_EXTERNAL_CORRELATION);
	put32(e, DR_CUPTI_EXTCORR_EXTERNAL_KIND, DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
	put64(e, DR_CUPTI_EXTCORR_EXTERNAL_ID, id);
	put32(e, DR_CUPTI_EXTCORR_CORRELATION_ID, corr);
	npending += DR_CUPTI_EXTCORR_SIZE;
}

int cuptiActivityPushExternalCorrelationId(int kind, uint64_t id) {
	if (kind != DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 || depth == 16) return 1;
	stack[depth++] = id;
	if (mode("graphs")) {
		const uint64_t marker = (uint64_t)1 << 62;
		if (id < marker) return 0;
		if (subscribed != NULL && graph_callback_on) {
			uint8_t data[72];
			memset(data, 0, sizeof data);
			put32(data, DR_CUPTI_CALLBACKDATA_SITE, DR_CUPTI_API_ENTER);
			put32(data, DR_CUPTI_CALLBACKDATA_CORRELATION_ID, corr);
			subscribed(NULL, DR_CUPTI_CB_DOMAIN_DRIVER_API, DR_CUPTI_CBID_cuGraphLaunch, data);
		}
		uint64_t start = 10000 * (id - marker + 1);
		put_graph_launch(start, start + 5000);
		corr++;
		return 0;
	}
	if (mode("replays")) {
		const uint64_t marker = (uint64_t)1 << 62;
		if (id < marker) {
			if (nmade < 16) {
				made[nmade] = 2000 + id;
				node_made(made[nmade++]);
			}
			return 0;
		}
		put_correlation(id);
		for (int i = 0; i < nmade; i++) {
			uint64_t start = 10000 * (id - marker + 1) + 100 * (uint64_t)i;
			put_kernel(start, start + 50, made[i]);
		}
		corr++;
		return 0;
	}
	uint64_t node = 0;
	if (mode("nodes")) {
		// A node made under the push: its id is its handle (see
		// cuptiGetGraphNodeId above).
		node = 1000 + id;
		node_made(node);
		corr += 100; // a correlation nothing names
		goto kernel;
	}
	if (mode("callbacks")) {
		// A launch under the pushed id: the callback at its entry, then its
		// kernel record only.
		if (subscribed != NULL && launch_callback_on) {
			uint8_t data[72];
			memset(data, 0, sizeof data);
			put32(data, DR_CUPTI_CALLBACKDATA_SITE, DR_CUPTI_API_ENTER);
			put32(data, DR_CUPTI_CALLBACKDATA_CORRELATION_ID, corr);
			subscribed(NULL, DR_CUPTI_CB_DOMAIN_DRIVER_API, DR_CUPTI_CBID_cuLaunchKernel, data);
		}
		goto kernel;
	}
	put_correlation(id);
kernel:
	put_kernel(1000 * id, 1000 * id + 500, node);
	corr++;
	return 0;
}

int cuptiActivityPopExternalCorrelationId(int kind, uint64_t* last) {
	if (kind != DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 || depth == 0) return 18; // CUPTI_ERROR_QUEUE_EMPTY
	*last = stack[--depth];
	return 0;
}

int cuptiActivityFlushAll(uint32_t flag) {
	if (requested == NULL) return 7;
	uint8_t* buf = NULL;
	size_t size = 0, max = 0;
	requested(&buf, &size, &max);
	if (buf == NULL || size < npending) return 8;
	for (size_t i = 0; zeroed_buffers && i < npending; i++) {
		if (buf[i] != 0) return 9;
	}
	size_t valid = npending;
	// "partial": a default flush keeps back the last kernel record, as
	// CUPTI keeps a buffer whose records are not all complete.
	if (mode("partial") && (flag & DR_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == 0 && valid >= DR_CUPTI_KERNEL10_SIZE) {
		valid -= DR_CUPTI_KERNEL10_SIZE;
	}
	memcpy(buf, pending, valid);
	if (valid > 0 && !dropped_reported) {
		dropped_pending += 3;
		dropped_reported = 1;
	}
	memmove(pending, pending + valid, npending - valid);
	npending -= valid;
	completed(NULL, 0, buf, size, valid);
	return 0;
}
