// CUPTI activity tracing: loading, the buffer callbacks and record parsing.
// See cupti.h.
#include "cupti.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CUSLOT(field) offsetof(dr_cupti, field)

static const struct {
	size_t offset;
	const char* name;
	int required;
} dr_cupti_syms[] = {
	{CUSLOT(cuptiGetVersion), "cuptiGetVersion", 1},
	{CUSLOT(cuptiGetResultString), "cuptiGetResultString", 1},
	{CUSLOT(cuptiActivityRegisterCallbacks), "cuptiActivityRegisterCallbacks", 1},
	{CUSLOT(cuptiActivityEnable), "cuptiActivityEnable", 1},
	{CUSLOT(cuptiActivityDisable), "cuptiActivityDisable", 1},
	{CUSLOT(cuptiActivityFlushAll), "cuptiActivityFlushAll", 1},
	{CUSLOT(cuptiActivityGetNextRecord), "cuptiActivityGetNextRecord", 1},
	{CUSLOT(cuptiActivityGetNumDroppedRecords), "cuptiActivityGetNumDroppedRecords", 1},
	{CUSLOT(cuptiActivityPushExternalCorrelationId), "cuptiActivityPushExternalCorrelationId", 1},
	{CUSLOT(cuptiActivityPopExternalCorrelationId), "cuptiActivityPopExternalCorrelationId", 1},
	{CUSLOT(cuptiGetTimestamp), "cuptiGetTimestamp", 1},
	{CUSLOT(cuptiFinalize), "cuptiFinalize", 0},
	{CUSLOT(cuptiActivityEnableDriverApi), "cuptiActivityEnableDriverApi", 1},
	{CUSLOT(cuptiGetGraphNodeId), "cuptiGetGraphNodeId", 1},
	{CUSLOT(cuptiSubscribe), "cuptiSubscribe", 1},
	{CUSLOT(cuptiUnsubscribe), "cuptiUnsubscribe", 1},
	{CUSLOT(cuptiEnableCallback), "cuptiEnableCallback", 1},
	{CUSLOT(cuptiActivitySetAttribute), "cuptiActivitySetAttribute", 0},
};

int dr_cupti_load(dr_cupti* c, const char* path, const char** missing) {
	memset(c, 0, sizeof(*c));
	c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (c->lib == NULL) {
		*missing = dlerror();
		return -1;
	}
	for (size_t i = 0; i < sizeof(dr_cupti_syms) / sizeof(dr_cupti_syms[0]); i++) {
		void* p = dlsym(c->lib, dr_cupti_syms[i].name);
		if (p == NULL && dr_cupti_syms[i].required) {
			*missing = dr_cupti_syms[i].name;
			dlclose(c->lib);
			c->lib = NULL;
			return 1;
		}
		memcpy((char*)c + dr_cupti_syms[i].offset, &p, sizeof(p));
	}
	return 0;
}

void dr_cupti_unload(dr_cupti* c) {
	// CUPTI may keep threads of its own running once activity was enabled,
	// so the library stays mapped; only the table is dropped.
	memset(c, 0, sizeof(*c));
}

// The sink: CUPTI's buffer callbacks carry no user data, so the records they
// parse go to this one process-wide place, owned by one tracer at a time.
// The callbacks call CUPTI through copies of its entry points taken at
// start (the library is never unloaded), never through the owner's table,
// and call it without holding the lock, so that no CUPTI lock is ever
// waited for under it.
// How many parsed buffers the sink keeps for CUPTI's next requests.
#define DR_CUPTI_SPARE_BUFFERS 4

static struct {
	pthread_mutex_t mu;
	dr_cupti* owner;
	dr_cupti_result (*getNextRecord)(uint8_t*, size_t, void**);
	dr_cupti_result (*getNumDropped)(CUcontext, uint32_t, size_t*);
	dr_cupti_result (*getGraphNodeId)(CUgraphNode, uint64_t*);
	size_t bufsize;
	dr_cupti_rec* recs;
	size_t n, cap;
	uint64_t dropped, lost;
	// The diagnostics of dr_cupti_stats: counted since the tracer started
	// (declined and idle_buffers also while no tracer holds the sink).
	dr_cupti_stats stats;
	uint32_t cbids[DR_CUPTI_MAX_CBIDS];
	int ncbids;
	void* subscriber;
	uint64_t* clones; // pairs: clone's id, original's id
	size_t nclones, capclones;
	uint64_t* links; // pairs: correlation id, op id
	size_t nlinks, caplinks;
	uint64_t* nodes; // pairs: captured node's id, op id
	size_t nnodes, capnodes;
	// Buffers handed back and parsed, kept for CUPTI's next requests: a
	// fresh one costs its allocation and page faults (hundreds of
	// microseconds for 4 MiB) on the thread that submits the first op
	// after a flush, every run. Freed when the tracer stops.
	uint8_t* spare[DR_CUPTI_SPARE_BUFFERS];
	size_t nspare, sparesize;
	// zeroed: CUPTI takes the buffers it is given as zeroed
	// (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), so the sink zeroes
	// them: a fresh one whole, once, and a recycled one only where CUPTI
	// wrote. Otherwise CUPTI zeroes every buffer it is given, all 4 MiB, on
	// the thread whose call needs it: after each flush that is the first op
	// of the next run, which it held back by about 0.4 ms on the H100.
	int zeroed;
} sink = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define ALIGNMENT 8

// The ops pushed on this thread, innermost last; -1 when none is.
#define DR_CUPTI_OP_DEPTH 16
static _Thread_local int64_t op_stack[DR_CUPTI_OP_DEPTH];
static _Thread_local int op_depth;

// append_pair appends (a, b) to a malloc'd array of pairs; 0 when out of memory.
static int append_pair(uint64_t** arr, size_t* n, size_t* cap, uint64_t a, uint64_t b) {
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 1024;
		uint64_t* grown = realloc(*arr, ncap * 2 * sizeof(uint64_t));
		if (grown == NULL) {
			return 0;
		}
		*arr = grown;
		*cap = ncap;
	}
	(*arr)[2 * *n] = a;
	(*arr)[2 * *n + 1] = b;
	(*n)++;
	return 1;
}

static void buffer_requested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
	pthread_mutex_lock(&sink.mu);
	size_t want = sink.bufsize;
	void* p = NULL;
	sink.stats.requests++;
	if (want != 0 && sink.nspare > 0 && sink.sparesize == want) {
		p = sink.spare[--sink.nspare];
	} else if (want != 0) {
		sink.stats.fresh++;
	}
	pthread_mutex_unlock(&sink.mu);
	if (p != NULL) {
		*buffer = p;
		*size = want;
		*maxNumRecords = 0;
		return;
	}
	if (want != 0 && posix_memalign(&p, ALIGNMENT, want) == 0) {
		memset(p, 0, want); // zeroed or not, CUPTI would do it here
	} else {
		p = NULL;
		want = 0;
		// CUPTI drops what it has no buffer for, and counts it: a decline
		// while no tracer holds the sink shows in the next tracer's count
		// unless dr_cupti_start drains it.
		pthread_mutex_lock(&sink.mu);
		sink.stats.declined++;
		pthread_mutex_unlock(&sink.mu);
	}
	*buffer = p;
	*size = want;
	*maxNumRecords = 0;
}

static uint32_t u32(const uint8_t* r, size_t off) { uint32_t v; memcpy(&v, r + off, sizeof v); return v; }
static uint64_t u64(const uint8_t* r, size_t off) { uint64_t v; memcpy(&v, r + off, sizeof v); return v; }

// parse reduces one record; it returns 0 for kinds dagrun does not read.
static int parse(const uint8_t* r, dr_cupti_rec* out) {
	memset(out, 0, sizeof(*out));
	out->kind = u32(r, 0);
	switch (out->kind) {
	case DR_CUPTI_KIND_CONCURRENT_KERNEL:
		out->start = u64(r, DR_CUPTI_KERNEL10_START);
		out->end = u64(r, DR_CUPTI_KERNEL10_END);
		out->device = u32(r, DR_CUPTI_KERNEL10_DEVICE_ID);
		out->context = u32(r, DR_CUPTI_KERNEL10_CONTEXT_ID);
		out->stream = u32(r, DR_CUPTI_KERNEL10_STREAM_ID);
		out->correlation = u32(r, DR_CUPTI_KERNEL10_CORRELATION_ID);
		out->graphNodeId = u64(r, DR_CUPTI_KERNEL10_GRAPH_NODE_ID);
		out->graphId = u32(r, DR_CUPTI_KERNEL10_GRAPH_ID);
		return 1;
	case DR_CUPTI_KIND_MEMCPY:
		out->sub = r[DR_CUPTI_MEMCPY6_COPY_KIND];
		out->bytes = u64(r, DR_CUPTI_MEMCPY6_BYTES);
		out->start = u64(r, DR_CUPTI_MEMCPY6_START);
		out->end = u64(r, DR_CUPTI_MEMCPY6_END);
		out->device = u32(r, DR_CUPTI_MEMCPY6_DEVICE_ID);
		out->context = u32(r, DR_CUPTI_MEMCPY6_CONTEXT_ID);
		out->stream = u32(r, DR_CUPTI_MEMCPY6_STREAM_ID);
		out->correlation = u32(r, DR_CUPTI_MEMCPY6_CORRELATION_ID);
		out->graphNodeId = u64(r, DR_CUPTI_MEMCPY6_GRAPH_NODE_ID);
		out->graphId = u32(r, DR_CUPTI_MEMCPY6_GRAPH_ID);
		return 1;
	case DR_CUPTI_KIND_MEMCPY2: // a copy between devices: read as any copy
		out->kind = DR_CUPTI_KIND_MEMCPY;
		out->sub = r[DR_CUPTI_PTOP4_COPY_KIND];
		out->bytes = u64(r, DR_CUPTI_PTOP4_BYTES);
		out->start = u64(r, DR_CUPTI_PTOP4_START);
		out->end = u64(r, DR_CUPTI_PTOP4_END);
		out->device = u32(r, DR_CUPTI_PTOP4_DEVICE_ID);
		out->context = u32(r, DR_CUPTI_PTOP4_CONTEXT_ID);
		out->stream = u32(r, DR_CUPTI_PTOP4_STREAM_ID);
		out->correlation = u32(r, DR_CUPTI_PTOP4_CORRELATION_ID);
		out->graphNodeId = u64(r, DR_CUPTI_PTOP4_GRAPH_NODE_ID);
		out->graphId = u32(r, DR_CUPTI_PTOP4_GRAPH_ID);
		return 1;
	case DR_CUPTI_KIND_MEMSET:
		out->bytes = u64(r, DR_CUPTI_MEMSET4_BYTES);
		out->start = u64(r, DR_CUPTI_MEMSET4_START);
		out->end = u64(r, DR_CUPTI_MEMSET4_END);
		out->device = u32(r, DR_CUPTI_MEMSET4_DEVICE_ID);
		out->context = u32(r, DR_CUPTI_MEMSET4_CONTEXT_ID);
		out->stream = u32(r, DR_CUPTI_MEMSET4_STREAM_ID);
		out->correlation = u32(r, DR_CUPTI_MEMSET4_CORRELATION_ID);
		out->graphNodeId = u64(r, DR_CUPTI_MEMSET4_GRAPH_NODE_ID);
		out->graphId = u32(r, DR_CUPTI_MEMSET4_GRAPH_ID);
		return 1;
	case DR_CUPTI_KIND_EXTERNAL_CORRELATION:
		if (u32(r, DR_CUPTI_EXTCORR_EXTERNAL_KIND) != DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
			return 0;
		}
		out->external = u64(r, DR_CUPTI_EXTCORR_EXTERNAL_ID);
		out->correlation = u32(r, DR_CUPTI_EXTCORR_CORRELATION_ID);
		return 1;
	case DR_CUPTI_KIND_GRAPH_TRACE:
		out->correlation = u32(r, DR_CUPTI_GRAPHTRACE2_CORRELATION_ID);
		out->start = u64(r, DR_CUPTI_GRAPHTRACE2_START);
		out->end = u64(r, DR_CUPTI_GRAPHTRACE2_END);
		out->device = u32(r, DR_CUPTI_GRAPHTRACE2_DEVICE_ID);
		out->graphId = u32(r, DR_CUPTI_GRAPHTRACE2_GRAPH_ID);
		out->context = u32(r, DR_CUPTI_GRAPHTRACE2_CONTEXT_ID);
		out->stream = u32(r, DR_CUPTI_GRAPHTRACE2_STREAM_ID);
		return 1;
	case DR_CUPTI_KIND_MEMORY_POOL:
		out->sub = u32(r, DR_CUPTI_MEMPOOL3_OPERATION_TYPE);
		out->correlation = u32(r, DR_CUPTI_MEMPOOL3_CORRELATION_ID);
		out->device = u32(r, DR_CUPTI_MEMPOOL3_DEVICE_ID);
		out->bytes = u64(r, DR_CUPTI_MEMPOOL3_SIZE_FIELD);
		out->start = out->end = u64(r, DR_CUPTI_MEMPOOL3_TIMESTAMP);
		return 1;
	}
	return 0;
}

// How far past a buffer's valid bytes CUPTI may have written (a record it
// started and did not count): zeroed with them when the buffer is recycled.
#define DR_CUPTI_DIRTY_MARGIN (64 << 10)

// recycle keeps a parsed buffer for the next request while a tracer holds
// the sink and there is room, zeroed where CUPTI wrote when CUPTI takes
// buffers as zeroed; it frees it otherwise.
static void recycle(uint8_t* buffer, size_t size, size_t validSize) {
	pthread_mutex_lock(&sink.mu);
	int zero = sink.zeroed;
	pthread_mutex_unlock(&sink.mu);
	if (zero && buffer != NULL) {
		size_t dirty = size;
		if (size > DR_CUPTI_DIRTY_MARGIN && validSize < size - DR_CUPTI_DIRTY_MARGIN) {
			dirty = validSize + DR_CUPTI_DIRTY_MARGIN;
		}
		memset(buffer, 0, dirty);
	}
	pthread_mutex_lock(&sink.mu);
	if (sink.owner != NULL && size == sink.bufsize && sink.nspare < DR_CUPTI_SPARE_BUFFERS) {
		sink.spare[sink.nspare++] = buffer;
		sink.sparesize = size;
		buffer = NULL;
	}
	pthread_mutex_unlock(&sink.mu);
	free(buffer);
}

// free_spares frees the kept buffers; the caller holds sink.mu.
static void free_spares(void) {
	while (sink.nspare > 0) {
		free(sink.spare[--sink.nspare]);
	}
}

static void buffer_completed(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t size, size_t validSize) {
	(void)size;
	pthread_mutex_lock(&sink.mu);
	int active = sink.owner != NULL;
	dr_cupti_result (*next)(uint8_t*, size_t, void**) = sink.getNextRecord;
	dr_cupti_result (*dropped)(CUcontext, uint32_t, size_t*) = sink.getNumDropped;
	pthread_mutex_unlock(&sink.mu);
	if (!active || buffer == NULL) {
		free(buffer);
		pthread_mutex_lock(&sink.mu);
		sink.stats.idle_buffers++;
		pthread_mutex_unlock(&sink.mu);
		return;
	}
	// Parse into a local array without the lock, then append it.
	dr_cupti_rec* recs = NULL;
	size_t n = 0, cap = 0;
	uint64_t lost = 0;
	void* rec = NULL;
	while (next(buffer, validSize, &rec) == DR_CUPTI_SUCCESS) {
		dr_cupti_rec r;
		if (!parse((const uint8_t*)rec, &r)) {
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			dr_cupti_rec* grown = realloc(recs, ncap * sizeof(dr_cupti_rec));
			if (grown == NULL) {
				lost++;
				continue;
			}
			recs = grown;
			cap = ncap;
		}
		recs[n++] = r;
	}
	recycle(buffer, size, validSize);
	size_t nd = 0;
	// The buffer's own context and stream, as CUPTI's documentation asks.
	if (dropped(ctx, streamId, &nd) != DR_CUPTI_SUCCESS) {
		nd = 0;
	}
	pthread_mutex_lock(&sink.mu);
	sink.dropped += nd;
	sink.lost += lost;
	sink.stats.dropped += nd;
	sink.stats.lost += lost;
	if (nd > 0 && sink.stats.ndrops < DR_CUPTI_MAX_DROPS) {
		dr_cupti_drop* d = &sink.stats.drops[sink.stats.ndrops++];
		d->ctx = (uint64_t)(uintptr_t)ctx;
		d->stream = streamId;
		d->records = (uint32_t)n;
		d->dropped = nd;
		d->valid = validSize;
		d->seq = sink.stats.buffers;
	}
	sink.stats.buffers++;
	if (sink.owner != NULL && n > 0) {
		if (sink.cap - sink.n < n) {
			size_t ncap = sink.cap ? sink.cap : 4096;
			while (ncap - sink.n < n) {
				ncap *= 2;
			}
			dr_cupti_rec* grown = realloc(sink.recs, ncap * sizeof(dr_cupti_rec));
			if (grown == NULL) {
				sink.lost += n;
				sink.stats.lost += n;
				n = 0;
			} else {
				sink.recs = grown;
				sink.cap = ncap;
			}
		}
		if (n > 0) {
			memcpy(sink.recs + sink.n, recs, n * sizeof(dr_cupti_rec));
			sink.n += n;
		}
	}
	pthread_mutex_unlock(&sink.mu);
	free(recs);
}

// launch_entered pairs a submitting driver call's correlation id with the
// op pushed on the calling thread (CUPTI calls it there, at the call's
// entry), so that the call's device records name the op. It takes the sink's
// lock briefly and calls nothing of CUPTI's.
static void launch_entered(const void* cbdata) {
	if (op_depth <= 0 || op_depth > DR_CUPTI_OP_DEPTH) {
		return;
	}
	uint32_t site, corr;
	memcpy(&site, (const char*)cbdata + DR_CUPTI_CALLBACKDATA_SITE, sizeof site);
	if (site != DR_CUPTI_API_ENTER) {
		return;
	}
	memcpy(&corr, (const char*)cbdata + DR_CUPTI_CALLBACKDATA_CORRELATION_ID, sizeof corr);
	int64_t op = op_stack[op_depth - 1];
	pthread_mutex_lock(&sink.mu);
	if (sink.owner != NULL && !append_pair(&sink.links, &sink.nlinks, &sink.caplinks, corr, (uint64_t)op)) {
		sink.lost++;
		sink.stats.lost++;
	}
	pthread_mutex_unlock(&sink.mu);
}

// node_created names a graph node created while an op is pushed on this
// thread (a stream capture of the op's submission) by that op.
static void node_created(const void* cbdata) {
	if (op_depth <= 0 || op_depth > DR_CUPTI_OP_DEPTH) {
		return;
	}
	void* desc;
	memcpy(&desc, (const char*)cbdata + DR_CUPTI_RESOURCEDATA_DESCRIPTOR, sizeof desc);
	if (desc == NULL) {
		return;
	}
	CUgraphNode node;
	memcpy(&node, (const char*)desc + DR_CUPTI_GRAPHDATA_NODE, sizeof node);
	pthread_mutex_lock(&sink.mu);
	int active = sink.owner != NULL;
	dr_cupti_result (*nodeId)(CUgraphNode, uint64_t*) = sink.getGraphNodeId;
	pthread_mutex_unlock(&sink.mu);
	uint64_t id;
	if (!active || node == NULL || nodeId(node, &id) != DR_CUPTI_SUCCESS) {
		return;
	}
	int64_t op = op_stack[op_depth - 1];
	pthread_mutex_lock(&sink.mu);
	if (!append_pair(&sink.nodes, &sink.nnodes, &sink.capnodes, id, (uint64_t)op)) {
		sink.lost++;
		sink.stats.lost++;
	}
	pthread_mutex_unlock(&sink.mu);
}

// node_cloned records which node an instantiated graph's node was cloned
// from: CUPTI calls it on the instantiating thread. It also dispatches the
// driver API callbacks to launch_entered: CUPTI allows one subscriber.
static void node_cloned(void* userdata, int domain, uint32_t cbid, const void* cbdata) {
	(void)userdata;
	if (domain == DR_CUPTI_CB_DOMAIN_DRIVER_API && cbdata != NULL) {
		launch_entered(cbdata);
		return;
	}
	if (domain == DR_CUPTI_CB_DOMAIN_RESOURCE && cbid == DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbdata != NULL) {
		node_created(cbdata);
		return;
	}
	if (domain != DR_CUPTI_CB_DOMAIN_RESOURCE || cbid != DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED || cbdata == NULL) {
		return;
	}
	void* desc;
	memcpy(&desc, (const char*)cbdata + DR_CUPTI_RESOURCEDATA_DESCRIPTOR, sizeof desc);
	if (desc == NULL) {
		return;
	}
	CUgraphNode node, orig;
	memcpy(&node, (const char*)desc + DR_CUPTI_GRAPHDATA_NODE, sizeof node);
	memcpy(&orig, (const char*)desc + DR_CUPTI_GRAPHDATA_ORIGINAL_NODE, sizeof orig);
	pthread_mutex_lock(&sink.mu);
	int active = sink.owner != NULL;
	dr_cupti_result (*nodeId)(CUgraphNode, uint64_t*) = sink.getGraphNodeId;
	pthread_mutex_unlock(&sink.mu);
	uint64_t ids[2];
	if (!active || node == NULL || orig == NULL || nodeId(node, &ids[0]) != DR_CUPTI_SUCCESS ||
	    nodeId(orig, &ids[1]) != DR_CUPTI_SUCCESS) {
		return;
	}
	pthread_mutex_lock(&sink.mu);
	if (!append_pair(&sink.clones, &sink.nclones, &sink.capclones, ids[0], ids[1])) {
		sink.lost++;
		sink.stats.lost++;
	}
	pthread_mutex_unlock(&sink.mu);
}

static void disable_api(dr_cupti* c, int upto) {
	for (int i = 0; i < upto; i++) {
		c->cuptiActivityEnableDriverApi(sink.cbids[i], 0);
	}
}

dr_cupti_result dr_cupti_start(dr_cupti* c, const int* kinds, int nrequired, int n, int* enabled,
                               const uint32_t* cbids, int ncbids, size_t bufsize, const char** failed, int* kind) {
	*kind = 0;
	if (ncbids < 0 || ncbids > DR_CUPTI_MAX_CBIDS) {
		*failed = "dr_cupti_start (too many driver calls to trace)";
		return 1; // CUPTI_ERROR_INVALID_PARAMETER
	}
	pthread_mutex_lock(&sink.mu);
	if (sink.owner != NULL) {
		pthread_mutex_unlock(&sink.mu);
		*failed = "dagrun's CUPTI sink (another tracer in this process holds it)";
		return -1;
	}
	sink.owner = c;
	sink.getNextRecord = c->cuptiActivityGetNextRecord;
	sink.getNumDropped = c->cuptiActivityGetNumDroppedRecords;
	sink.getGraphNodeId = c->cuptiGetGraphNodeId;
	sink.bufsize = bufsize;
	sink.n = 0;
	sink.dropped = sink.lost = 0;
	uint64_t declined = sink.stats.declined;
	memset(&sink.stats, 0, sizeof(sink.stats));
	sink.stats.declined_before = declined;
	memcpy(sink.cbids, cbids, (size_t)ncbids * sizeof(uint32_t));
	sink.ncbids = 0; // how many are enabled
	pthread_mutex_unlock(&sink.mu);

	for (int i = 0; i < n; i++) {
		enabled[i] = 0;
	}
	// Buffers come zeroed from the sink (see sink.zeroed); a CUPTI without
	// the attribute zeroes them itself.
	uint8_t one = 1;
	size_t onesize = sizeof one;
	int zeroed = c->cuptiActivitySetAttribute != NULL &&
	             c->cuptiActivitySetAttribute(DR_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &onesize, &one) == DR_CUPTI_SUCCESS;
	pthread_mutex_lock(&sink.mu);
	sink.zeroed = zeroed;
	sink.stats.zeroed = (uint32_t)zeroed;
	pthread_mutex_unlock(&sink.mu);
	*failed = "cuptiActivityRegisterCallbacks";
	dr_cupti_result r = c->cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r == DR_CUPTI_SUCCESS) {
		// CUPTI's dropped count lives on between tracers (it resets only
		// when read): drain what was dropped before this one, while no
		// buffer was given, so that it is not counted as this tracer's.
		size_t before = 0;
		if (c->cuptiActivityGetNumDroppedRecords(NULL, 0, &before) == DR_CUPTI_SUCCESS) {
			pthread_mutex_lock(&sink.mu);
			sink.stats.dropped_before = before;
			pthread_mutex_unlock(&sink.mu);
		}
		*failed = "cuptiActivityEnable";
		for (int i = 0; i < n; i++) {
			dr_cupti_result e = c->cuptiActivityEnable(kinds[i]);
			enabled[i] = e == DR_CUPTI_SUCCESS;
			if (e != DR_CUPTI_SUCCESS && i < nrequired) {
				r = e;
				*kind = kinds[i];
				break;
			}
		}
	}
	if (r == DR_CUPTI_SUCCESS && c->external) {
		*failed = "cuptiActivityEnableDriverApi";
		for (; sink.ncbids < ncbids; sink.ncbids++) {
			r = c->cuptiActivityEnableDriverApi(sink.cbids[sink.ncbids], 1);
			if (r != DR_CUPTI_SUCCESS) {
				*kind = (int)sink.cbids[sink.ncbids];
				break;
			}
		}
	}
	if (r == DR_CUPTI_SUCCESS) {
		*failed = "cuptiSubscribe";
		r = c->cuptiSubscribe(&sink.subscriber, node_cloned, NULL);
		if (r == DR_CUPTI_SUCCESS) {
			*failed = "cuptiEnableCallback";
			r = c->cuptiEnableCallback(1, sink.subscriber, DR_CUPTI_CB_DOMAIN_RESOURCE, DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
			if (r == DR_CUPTI_SUCCESS) {
				r = c->cuptiEnableCallback(1, sink.subscriber, DR_CUPTI_CB_DOMAIN_RESOURCE, DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
			}
			for (int i = 0; r == DR_CUPTI_SUCCESS && i < ncbids; i++) {
				r = c->cuptiEnableCallback(1, sink.subscriber, DR_CUPTI_CB_DOMAIN_DRIVER_API, sink.cbids[i]);
				if (r != DR_CUPTI_SUCCESS) {
					*kind = (int)sink.cbids[i];
				}
			}
			if (r != DR_CUPTI_SUCCESS) {
				c->cuptiUnsubscribe(sink.subscriber);
			}
		}
		if (r != DR_CUPTI_SUCCESS) {
			sink.subscriber = NULL;
		}
	}
	if (r == DR_CUPTI_SUCCESS) {
		*failed = NULL;
		return r;
	}
	disable_api(c, sink.ncbids);
	sink.ncbids = 0;
	for (int i = 0; i < n; i++) {
		if (enabled[i]) {
			c->cuptiActivityDisable(kinds[i]);
			enabled[i] = 0;
		}
	}
	pthread_mutex_lock(&sink.mu);
	sink.owner = NULL;
	pthread_mutex_unlock(&sink.mu);
	return r;
}

dr_cupti_result dr_cupti_take(dr_cupti* c, int force, dr_cupti_rec** out, size_t* n, uint64_t** clones, size_t* nclones,
                              uint64_t** links, size_t* nlinks, uint64_t** nodes, size_t* nnodes, uint64_t* dropped,
                              uint64_t* lost) {
	// FlushAll calls buffer_completed, which takes the lock: flush first.
	dr_cupti_result r = c->cuptiActivityFlushAll(force ? DR_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
	pthread_mutex_lock(&sink.mu);
	*out = sink.recs;
	*n = sink.n;
	*dropped = sink.dropped;
	*lost = sink.lost;
	*clones = sink.clones;
	*nclones = sink.nclones;
	sink.clones = NULL;
	sink.nclones = sink.capclones = 0;
	*links = sink.links;
	*nlinks = sink.nlinks;
	sink.links = NULL;
	sink.nlinks = sink.caplinks = 0;
	*nodes = sink.nodes;
	*nnodes = sink.nnodes;
	sink.nodes = NULL;
	sink.nnodes = sink.capnodes = 0;
	sink.recs = NULL;
	sink.n = sink.cap = 0;
	sink.dropped = sink.lost = 0;
	pthread_mutex_unlock(&sink.mu);
	return r;
}

dr_cupti_result dr_cupti_switch(dr_cupti* c, const int* kinds, int n, int on) {
	dr_cupti_result first = DR_CUPTI_SUCCESS;
	for (int i = 0; i < n; i++) {
		dr_cupti_result r = on ? c->cuptiActivityEnable(kinds[i]) : c->cuptiActivityDisable(kinds[i]);
		if (first == DR_CUPTI_SUCCESS) {
			first = r;
		}
	}
	return first;
}

dr_cupti_result dr_cupti_stop(dr_cupti* c, const int* kinds, int n) {
	dr_cupti_result first = DR_CUPTI_SUCCESS;
	disable_api(c, sink.ncbids);
	sink.ncbids = 0;
	if (sink.subscriber != NULL) {
		first = c->cuptiUnsubscribe(sink.subscriber);
		sink.subscriber = NULL;
	}
	for (int i = 0; i < n; i++) {
		dr_cupti_result r = c->cuptiActivityDisable(kinds[i]);
		if (first == DR_CUPTI_SUCCESS) {
			first = r;
		}
	}
	dr_cupti_result r = c->cuptiActivityFlushAll(DR_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (first == DR_CUPTI_SUCCESS) {
		first = r;
	}
	pthread_mutex_lock(&sink.mu);
	free_spares();
	free(sink.recs);
	sink.recs = NULL;
	sink.n = sink.cap = 0;
	free(sink.clones);
	sink.clones = NULL;
	sink.nclones = sink.capclones = 0;
	free(sink.links);
	sink.links = NULL;
	sink.nlinks = sink.caplinks = 0;
	free(sink.nodes);
	sink.nodes = NULL;
	sink.nnodes = sink.capnodes = 0;
	sink.owner = NULL;
	sink.bufsize = 0;
	pthread_mutex_unlock(&sink.mu);
	return first;
}

void dr_cupti_get_stats(dr_cupti_stats* out) {
	pthread_mutex_lock(&sink.mu);
	*out = sink.stats;
	pthread_mutex_unlock(&sink.mu);
}

dr_cupti_result dr_cupti_graph_node_id(dr_cupti* c, CUgraphNode node, uint64_t* id) {
	return c->cuptiGetGraphNodeId(node, id);
}

dr_cupti_result dr_cupti_push(dr_cupti* c, uint64_t id) {
	if (op_depth >= DR_CUPTI_OP_DEPTH || id > (uint64_t)INT64_MAX) {
		return 1; // CUPTI_ERROR_INVALID_PARAMETER
	}
	// The thread-local op first: CUPTI's push may itself submit nothing, but
	// a callback must never see the external id without the op.
	op_stack[op_depth++] = (int64_t)id;
	if (!c->external) return DR_CUPTI_SUCCESS;
	dr_cupti_result r = c->cuptiActivityPushExternalCorrelationId(DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
	if (r != DR_CUPTI_SUCCESS) {
		op_depth--;
	}
	return r;
}

dr_cupti_result dr_cupti_pop(dr_cupti* c) {
	uint64_t last = 0;
	dr_cupti_result r = op_depth > 0 ? DR_CUPTI_SUCCESS : 18; // CUPTI_ERROR_QUEUE_EMPTY
	if (c->external) r = c->cuptiActivityPopExternalCorrelationId(DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
	if (op_depth > 0) {
		op_depth--;
	}
	return r;
}
