#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "_cgo_export.h"

dr_launch* dr_launch_new(int nslots) {
	size_t n = sizeof(dr_launch) + (size_t)nslots * (sizeof(void*) + sizeof(uint64_t));
	dr_launch* l = calloc(1, n);
	if (l == NULL) {
		return NULL;
	}
	l->nslots = nslots;
	l->params = (void**)(l + 1);
	l->slots = (uint64_t*)(l->params + nslots);
	for (int i = 0; i < nslots; i++) {
		l->params[i] = &l->slots[i];
	}
	return l;
}

// dr_ctx makes c current on the calling thread if it is not already: a
// thread-local read in the driver when nothing changes.
CUresult dr_ctx(dr_api* a, CUcontext c) {
	CUcontext cur = NULL;
	CUresult r = a->cuCtxGetCurrent(&cur);
	if (r != DR_SUCCESS) {
		return r;
	}
	return cur == c ? DR_SUCCESS : a->cuCtxSetCurrent(c);
}

#define WITH_CTX(call)                    \
	do {                                  \
		CUresult r_ = dr_ctx(a, c);       \
		if (r_ != DR_SUCCESS) return r_;  \
		return (call);                    \
	} while (0)

CUresult dr_launch_on(dr_api* a, const dr_launch* l, CUstream s) {
	void** params = l->nslots > 0 ? l->params : NULL;
	if (l->early && a->cuLaunchKernelEx != NULL) {
		dr_launch_attr attr;
		memset(&attr, 0, sizeof attr);
		attr.id = DR_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		attr.value.programmaticStreamSerializationAllowed = 1;
		dr_launch_config cfg;
		memset(&cfg, 0, sizeof cfg);
		cfg.gridDimX = l->gx;
		cfg.gridDimY = l->gy;
		cfg.gridDimZ = l->gz;
		cfg.blockDimX = l->bx;
		cfg.blockDimY = l->by;
		cfg.blockDimZ = l->bz;
		cfg.sharedMemBytes = l->shared;
		cfg.hStream = s;
		cfg.attrs = &attr;
		cfg.numAttrs = 1;
		return a->cuLaunchKernelEx(&cfg, l->f, params, NULL);
	}
	return a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, s, params, NULL);
}

CUresult dr_launch_kernel(dr_api* a, CUcontext c, dr_launch* l, CUstream s) { WITH_CTX(dr_launch_on(a, l, s)); }

int dr_launch_ex_supported(dr_api* a) { return a->cuLaunchKernelEx != NULL; }

CUresult dr_record(dr_api* a, CUcontext c, CUevent e, CUstream s) { WITH_CTX(a->cuEventRecord(e, s)); }

CUresult dr_wait(dr_api* a, CUcontext c, CUstream s, CUevent e) { WITH_CTX(a->cuStreamWaitEvent(s, e, 0)); }

CUresult dr_alloc_async(dr_api* a, CUcontext c, CUdeviceptr* p, size_t n, CUstream s) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	r = a->cuMemAllocAsync(p, n, s);
	if (r != DR_SUCCESS) return r;
	// Temporaries start as zeros on every backend.
	return a->cuMemsetD8Async(*p, 0, n, s);
}

CUresult dr_free_async(dr_api* a, CUcontext c, CUdeviceptr p, CUstream s) { WITH_CTX(a->cuMemFreeAsync(p, s)); }

CUresult dr_htod_async(dr_api* a, CUcontext c, CUdeviceptr d, const void* h, size_t n, CUstream s) {
	WITH_CTX(a->cuMemcpyHtoDAsync(d, h, n, s));
}

CUresult dr_dtoh_async(dr_api* a, CUcontext c, void* h, CUdeviceptr d, size_t n, CUstream s) {
	WITH_CTX(a->cuMemcpyDtoHAsync(h, d, n, s));
}

CUresult dr_dtod_async(dr_api* a, CUcontext c, CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s) {
	WITH_CTX(a->cuMemcpyDtoDAsync(d, src, n, s));
}

// dr_copy_async copies between any two device addresses (unified
// addressing): between devices it is the copy stream capture accepts,
// which cuMemcpyPeerAsync is not (testdata/peer_capture_probe.c).
CUresult dr_copy_async(dr_api* a, CUcontext c, CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s) {
	WITH_CTX(a->cuMemcpyAsync(d, src, n, s));
}

// dr_staged_copy copies n bytes between two devices through the pinned
// buffer stage, slots chunks of chunk bytes, with both directions at once.
// The op's stream s (context c) takes one direction and the helper stream
// hs (context hc, on the other device) the other: s copies down (device to
// host) when down is set, up (host to device) otherwise. Chunk k goes down
// into slot k % slots and up from it. start, recorded on s first, orders
// the helper after s's earlier work; full[j] (of the down side's context)
// lets the up side read slot j once written, empty[j] (the up side's) lets
// the down side write it again once read; done (hc's), recorded after the
// helper's last copy, joins it back into s, so that s is ordered after the
// whole copy and a capture holds every piece. Eager runs and captures
// issue the same calls.
CUresult dr_staged_copy(dr_api* a, CUcontext c, CUstream s, CUcontext hc, CUstream hs, int down, CUdeviceptr dst, CUdeviceptr src,
                        size_t n, void* stage, size_t chunk, int slots, CUevent start, CUevent* full, CUevent* empty, CUevent done) {
	CUcontext dc = down ? c : hc, uc = down ? hc : c;
	CUstream ds = down ? s : hs, us = down ? hs : s;
	CUresult r;
	if ((r = dr_ctx(a, c)) != DR_SUCCESS || (r = a->cuEventRecord(start, s)) != DR_SUCCESS) return r;
	if ((r = dr_ctx(a, hc)) != DR_SUCCESS || (r = a->cuStreamWaitEvent(hs, start, 0)) != DR_SUCCESS) return r;
	size_t chunks = (n + chunk - 1) / chunk;
	for (size_t k = 0; k < chunks; k++) {
		size_t j = k % (size_t)slots, off = k * chunk, len = n - off < chunk ? n - off : chunk;
		char* h = (char*)stage + j * chunk;
		if ((r = dr_ctx(a, dc)) != DR_SUCCESS) return r;
		if (k >= (size_t)slots && (r = a->cuStreamWaitEvent(ds, empty[j], 0)) != DR_SUCCESS) return r;
		if ((r = a->cuMemcpyDtoHAsync(h, src + off, len, ds)) != DR_SUCCESS) return r;
		if ((r = a->cuEventRecord(full[j], ds)) != DR_SUCCESS) return r;
		if ((r = dr_ctx(a, uc)) != DR_SUCCESS) return r;
		if ((r = a->cuStreamWaitEvent(us, full[j], 0)) != DR_SUCCESS) return r;
		if ((r = a->cuMemcpyHtoDAsync(dst + off, h, len, us)) != DR_SUCCESS) return r;
		if (k + (size_t)slots < chunks && (r = a->cuEventRecord(empty[j], us)) != DR_SUCCESS) return r;
	}
	if ((r = dr_ctx(a, hc)) != DR_SUCCESS || (r = a->cuEventRecord(done, hs)) != DR_SUCCESS) return r;
	if ((r = dr_ctx(a, c)) != DR_SUCCESS) return r;
	return a->cuStreamWaitEvent(s, done, 0);
}

CUresult dr_memset_async(dr_api* a, CUcontext c, CUdeviceptr d, int elemsize, uint64_t pattern, size_t n, CUstream s) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	switch (elemsize) {
	case 1:
		return a->cuMemsetD8Async(d, (unsigned char)pattern, n, s);
	case 2:
		return a->cuMemsetD16Async(d, (unsigned short)pattern, n, s);
	case 4:
		return a->cuMemsetD32Async(d, (unsigned int)pattern, n, s);
	case 8:
		if ((pattern >> 32) == (pattern & 0xffffffffu)) {
			return a->cuMemsetD32Async(d, (unsigned int)pattern, 2 * n, s);
		}
	}
	return 1; // CUDA_ERROR_INVALID_VALUE: the caller launches a fill kernel instead
}

static void dr_hostwork_run(void* p) {
	dr_hostwork* w = p;
	if (w->kind == 0) {
		memmove(w->dst, w->src, w->n);
		return;
	}
	unsigned char* d = w->dst;
	if (w->patlen == 1) {
		memset(d, w->pat[0], w->n);
		return;
	}
	for (size_t i = 0; i < w->n; i++) {
		memcpy(d + i * (size_t)w->patlen, w->pat, (size_t)w->patlen);
	}
}

CUresult dr_hostwork_launch(dr_api* a, CUcontext c, dr_hostwork* w, CUstream s) {
	WITH_CTX(a->cuLaunchHostFunc(s, dr_hostwork_run, w));
}

static void dr_hostfunc_run(void* p) { dagrunHostCallback((uintptr_t)p); }

CUresult dr_hostfunc_launch(dr_api* a, CUcontext c, uintptr_t handle, CUstream s) {
	WITH_CTX(a->cuLaunchHostFunc(s, dr_hostfunc_run, (void*)handle));
}

CUresult dr_stream_sync(dr_api* a, CUcontext c, CUstream s) { WITH_CTX(a->cuStreamSynchronize(s)); }

CUresult dr_stream_query(dr_api* a, CUcontext c, CUstream s) { WITH_CTX(a->cuStreamQuery(s)); }


// NVRTC.

#define NVSLOT(field) offsetof(dr_nvrtc, field)

static const struct {
	size_t offset;
	const char* name;
	int required;
} dr_nvrtc_syms[] = {
	{NVSLOT(nvrtcGetErrorString), "nvrtcGetErrorString", 1},
	{NVSLOT(nvrtcVersion), "nvrtcVersion", 1},
	{NVSLOT(nvrtcCreateProgram), "nvrtcCreateProgram", 1},
	{NVSLOT(nvrtcDestroyProgram), "nvrtcDestroyProgram", 1},
	{NVSLOT(nvrtcCompileProgram), "nvrtcCompileProgram", 1},
	{NVSLOT(nvrtcGetProgramLogSize), "nvrtcGetProgramLogSize", 1},
	{NVSLOT(nvrtcGetProgramLog), "nvrtcGetProgramLog", 1},
	{NVSLOT(nvrtcGetPTXSize), "nvrtcGetPTXSize", 1},
	{NVSLOT(nvrtcGetPTX), "nvrtcGetPTX", 1},
	{NVSLOT(nvrtcGetCUBINSize), "nvrtcGetCUBINSize", 0},
	{NVSLOT(nvrtcGetCUBIN), "nvrtcGetCUBIN", 0},
};

int dr_nvrtc_load(dr_nvrtc* n, const char* path, const char** missing) {
	memset(n, 0, sizeof(*n));
	n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (n->lib == NULL) {
		*missing = dlerror();
		return -1;
	}
	for (size_t i = 0; i < sizeof(dr_nvrtc_syms) / sizeof(dr_nvrtc_syms[0]); i++) {
		void* p = dlsym(n->lib, dr_nvrtc_syms[i].name);
		if (p == NULL && dr_nvrtc_syms[i].required) {
			*missing = dr_nvrtc_syms[i].name;
			dlclose(n->lib);
			n->lib = NULL;
			return 1;
		}
		memcpy((char*)n + dr_nvrtc_syms[i].offset, &p, sizeof(p));
	}
	return 0;
}

void dr_nvrtc_unload(dr_nvrtc* n) {
	if (n->lib != NULL) {
		dlclose(n->lib);
	}
	memset(n, 0, sizeof(*n));
}

nvrtcResult dr_nvrtc_compile(dr_nvrtc* n, const char* src, const char* name, int nopt, const char** opts,
                             int cubin, char** out, size_t* outlen, char** log, const char** step) {
	nvrtcProgram prog = NULL;
	*out = NULL;
	*outlen = 0;
	*log = NULL;
	*step = "nvrtcCreateProgram";
	nvrtcResult r = n->nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
	if (r != 0) {
		return r;
	}
	*step = "nvrtcCompileProgram";
	nvrtcResult cr = n->nvrtcCompileProgram(prog, nopt, opts);
	size_t loglen = 0;
	if (n->nvrtcGetProgramLogSize(prog, &loglen) == 0 && loglen > 1) {
		*log = malloc(loglen);
		if (*log != NULL && n->nvrtcGetProgramLog(prog, *log) != 0) {
			free(*log);
			*log = NULL;
		}
	}
	if (cr != 0) {
		n->nvrtcDestroyProgram(&prog);
		return cr;
	}
	if (cubin && n->nvrtcGetCUBINSize != NULL) {
		*step = "nvrtcGetCUBIN";
		r = n->nvrtcGetCUBINSize(prog, outlen);
		if (r == 0) {
			*out = malloc(*outlen + 1);
			r = *out == NULL ? 6 : n->nvrtcGetCUBIN(prog, *out);
		}
	} else {
		*step = "nvrtcGetPTX";
		r = n->nvrtcGetPTXSize(prog, outlen);
		if (r == 0) {
			*out = malloc(*outlen + 1);
			r = *out == NULL ? 6 : n->nvrtcGetPTX(prog, *out);
		}
	}
	n->nvrtcDestroyProgram(&prog);
	return r;
}

CUresult dr_elapsed_many(dr_api* a, CUcontext c, CUevent origin, const CUevent* evs, int n, float* ms, int* failed) {
	CUresult first = dr_ctx(a, c);
	*failed = -1;
	if (first != DR_SUCCESS) {
		*failed = 0;
		return first;
	}
	for (int i = 0; i < n; i++) {
		CUresult r = a->cuEventElapsedTime(&ms[i], origin, evs[i]);
		if (r != DR_SUCCESS) {
			ms[i] = __builtin_nanf("");
			if (first == DR_SUCCESS) {
				first = r;
				*failed = i;
			}
		}
	}
	return first;
}

CUresult dr_raw_launches(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds, int sync) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	void** params = l->nslots > 0 ? l->params : NULL;
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < nstreams; k++) {
			r = a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, streams[k], params, NULL);
			if (r != DR_SUCCESS) return r;
		}
	}
	return sync ? a->cuCtxSynchronize() : DR_SUCCESS;
}

CUresult dr_raw_record_wait(dr_api* a, CUcontext c, CUevent e, CUstream from, CUstream to, int n) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	for (int i = 0; i < n; i++) {
		if ((r = a->cuEventRecord(e, from)) != DR_SUCCESS) return r;
		if ((r = a->cuStreamWaitEvent(to, e, 0)) != DR_SUCCESS) return r;
	}
	return DR_SUCCESS;
}

// dr_raw_timed_launches is dr_raw_launches with per (1 or 2) timing events
// recorded with each launch (before it when per is 2, after it always) and
// read back as times from evs[0], recorded first on streams[0]: the floor of
// traced eager submission. evs holds 1 + rounds*nstreams*per events; ms gets
// one time per event after the first, unless read is 0.
CUresult dr_raw_timed_launches(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds,
                               CUevent* evs, int per, float* ms, int read) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	void** params = l->nslots > 0 ? l->params : NULL;
	if ((r = a->cuEventRecord(evs[0], streams[0])) != DR_SUCCESS) return r;
	int e = 1;
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < nstreams; k++) {
			if (per == 2 && (r = a->cuEventRecord(evs[e++], streams[k])) != DR_SUCCESS) return r;
			r = a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, streams[k], params, NULL);
			if (r != DR_SUCCESS) return r;
			if ((r = a->cuEventRecord(evs[e++], streams[k])) != DR_SUCCESS) return r;
		}
	}
	if ((r = a->cuCtxSynchronize()) != DR_SUCCESS || !read) return r;
	int failed;
	return dr_elapsed_many(a, c, evs[0], evs + 1, e - 1, ms, &failed);
}

// Graphs.

CUresult dr_capture_begin(dr_api* a, CUcontext c, CUstream s) {
	WITH_CTX(a->cuStreamBeginCapture(s, DR_STREAM_CAPTURE_MODE_RELAXED));
}

CUresult dr_capture_end(dr_api* a, CUcontext c, CUstream s, CUgraph* g) { WITH_CTX(a->cuStreamEndCapture(s, g)); }

CUresult dr_graph_instantiate(dr_api* a, CUcontext c, CUgraphExec* e, CUgraph g, CUstream s) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	*e = NULL;
	r = a->cuGraphInstantiateWithFlags(e, g, DR_GRAPH_INSTANTIATE_USE_NODE_PRIORITY);
	if (r == 1) { // CUDA_ERROR_INVALID_VALUE: a driver without per-node priorities
		r = a->cuGraphInstantiateWithFlags(e, g, 0);
	}
	if (r != DR_SUCCESS || a->cuGraphUpload == NULL) return r;
	// The upload is waited for here, so that it is part of instantiation
	// and not of the first replay (on the H100 it took 117 us of fan_out's
	// first replay against 93 us after a waited upload).
	r = a->cuGraphUpload(*e, s);
	if (r == DR_SUCCESS) r = a->cuStreamSynchronize(s);
	if (r != DR_SUCCESS) {
		a->cuGraphExecDestroy(*e);
		*e = NULL;
	}
	return r;
}

CUresult dr_graph_launch(dr_api* a, CUcontext c, CUgraphExec e, CUstream s) { WITH_CTX(a->cuGraphLaunch(e, s)); }

CUresult dr_graph_exec_update(dr_api* a, CUcontext c, CUgraphExec e, CUgraph g, int* why) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	*why = 0;
	if (a->cuGraphExecUpdateV2 != NULL) {
		dr_exec_update_info info;
		memset(&info, 0, sizeof(info));
		r = a->cuGraphExecUpdateV2(e, g, &info);
		*why = info.result;
		return r;
	}
	if (a->cuGraphExecUpdateV1 != NULL) {
		CUgraphNode bad = NULL;
		return a->cuGraphExecUpdateV1(e, g, &bad, why);
	}
	*why = -1;
	return DR_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

CUresult dr_graph_exec_destroy(dr_api* a, CUcontext c, CUgraphExec e) { WITH_CTX(a->cuGraphExecDestroy(e)); }

CUresult dr_graph_destroy(dr_api* a, CUcontext c, CUgraph g) { WITH_CTX(a->cuGraphDestroy(g)); }

CUresult dr_graph_node_count(dr_api* a, CUcontext c, CUgraph g, size_t* n) {
	*n = 0;
	WITH_CTX(a->cuGraphGetNodes(g, NULL, n));
}

CUresult dr_raw_graph(dr_api* a, CUcontext c, dr_launch* l, CUstream* streams, int nstreams, int rounds, CUevent e, CUgraph* g) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	*g = NULL;
	if ((r = a->cuStreamBeginCapture(streams[0], DR_STREAM_CAPTURE_MODE_RELAXED)) != DR_SUCCESS) return r;
	CUresult bad = a->cuEventRecord(e, streams[0]);
	for (int k = 1; k < nstreams && bad == DR_SUCCESS; k++) {
		bad = a->cuStreamWaitEvent(streams[k], e, 0);
	}
	void** params = l->nslots > 0 ? l->params : NULL;
	for (int i = 0; i < rounds && bad == DR_SUCCESS; i++) {
		for (int k = 0; k < nstreams && bad == DR_SUCCESS; k++) {
			bad = a->cuLaunchKernel(l->f, l->gx, l->gy, l->gz, l->bx, l->by, l->bz, l->shared, streams[k], params, NULL);
		}
	}
	for (int k = 1; k < nstreams && bad == DR_SUCCESS; k++) {
		bad = a->cuEventRecord(e, streams[k]);
		if (bad == DR_SUCCESS) bad = a->cuStreamWaitEvent(streams[0], e, 0);
	}
	r = a->cuStreamEndCapture(streams[0], g);
	if (bad != DR_SUCCESS) {
		if (*g != NULL) a->cuGraphDestroy(*g);
		*g = NULL;
		return bad;
	}
	return r;
}

CUresult dr_raw_graph_launches(dr_api* a, CUcontext c, CUgraphExec e, CUstream s, int n) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	for (int i = 0; i < n; i++) {
		if ((r = a->cuGraphLaunch(e, s)) != DR_SUCCESS) return r;
	}
	return a->cuStreamSynchronize(s);
}

CUresult dr_raw_graph_explicit(dr_api* a, CUcontext c, dr_launch* l, int nchains, int rounds, CUgraph* g) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	*g = NULL;
	if (a->cuGraphCreate == NULL || a->cuGraphAddKernelNode == NULL) return 801; // CUDA_ERROR_NOT_SUPPORTED
	if ((r = a->cuGraphCreate(g, 0)) != DR_SUCCESS) return r;
	dr_kernel_node_params_v2 p;
	memset(&p, 0, sizeof(p));
	p.v1.func = l->f;
	p.v1.gridDimX = l->gx, p.v1.gridDimY = l->gy, p.v1.gridDimZ = l->gz;
	p.v1.blockDimX = l->bx, p.v1.blockDimY = l->by, p.v1.blockDimZ = l->bz;
	p.v1.sharedMemBytes = l->shared;
	p.v1.kernelParams = l->nslots > 0 ? l->params : NULL;
	for (int k = 0; k < nchains; k++) {
		CUgraphNode prev = NULL;
		for (int i = 0; i < rounds; i++) {
			CUgraphNode n = NULL;
			r = a->cuGraphAddKernelNode(&n, *g, prev != NULL ? &prev : NULL, prev != NULL ? 1 : 0, &p);
			if (r != DR_SUCCESS) {
				a->cuGraphDestroy(*g);
				*g = NULL;
				return r;
			}
			prev = n;
		}
	}
	return DR_SUCCESS;
}

// Raw sessions: the floor of executor.Open and Session.Close.

CUresult dr_raw_session_close(dr_api* a, CUcontext c, CUstream* streams, int nstreams, CUevent* events, int nevents,
                              void** bufs, const int* kinds, int nbufs) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	CUresult first = DR_SUCCESS;
	for (int i = 0; i < nstreams; i++) {
		if (streams[i] != NULL) {
			r = a->cuStreamSynchronize(streams[i]);
			if (first == DR_SUCCESS) first = r;
		}
	}
	for (int i = 0; i < nbufs; i++) {
		if (bufs[i] == NULL) continue;
		switch (kinds[i]) {
		case 0: r = a->cuMemFree((CUdeviceptr)(uintptr_t)bufs[i]); break;
		case 1: r = a->cuMemFreeHost(bufs[i]); break;
		default: free(bufs[i]); r = DR_SUCCESS;
		}
		if (first == DR_SUCCESS) first = r;
		bufs[i] = NULL;
	}
	for (int i = 0; i < nevents; i++) {
		if (events[i] != NULL) {
			r = a->cuEventDestroy(events[i]);
			if (first == DR_SUCCESS) first = r;
			events[i] = NULL;
		}
	}
	for (int i = 0; i < nstreams; i++) {
		if (streams[i] != NULL) {
			r = a->cuStreamDestroy(streams[i]);
			if (first == DR_SUCCESS) first = r;
			streams[i] = NULL;
		}
	}
	return first;
}

CUresult dr_raw_session_open(dr_api* a, CUcontext c, CUstream* streams, int nstreams, int prio, CUevent* events, int nevents,
                             void** bufs, const size_t* sizes, const int* kinds, int nbufs) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	for (int i = 0; i < nstreams; i++) streams[i] = NULL;
	for (int i = 0; i < nevents; i++) events[i] = NULL;
	for (int i = 0; i < nbufs; i++) bufs[i] = NULL;
	for (int i = 0; i < nbufs && r == DR_SUCCESS; i++) {
		switch (kinds[i]) {
		case 0: {
			CUdeviceptr p = 0;
			r = a->cuMemAlloc(&p, sizes[i]);
			if (r == DR_SUCCESS) {
				bufs[i] = (void*)(uintptr_t)p;
				r = a->cuMemsetD8(p, 0, sizes[i]);
			}
			break;
		}
		case 1:
			r = a->cuMemHostAlloc(&bufs[i], sizes[i], DR_MEMHOSTALLOC_PORTABLE | DR_MEMHOSTALLOC_DEVICEMAP);
			if (r == DR_SUCCESS) memset(bufs[i], 0, sizes[i]);
			break;
		default:
			bufs[i] = malloc(sizes[i] > 0 ? sizes[i] : 1);
			if (bufs[i] == NULL) r = 2; // CUDA_ERROR_OUT_OF_MEMORY
			else memset(bufs[i], 0, sizes[i]);
		}
	}
	for (int i = 0; i < nstreams && r == DR_SUCCESS; i++) {
		r = a->cuStreamCreateWithPriority(&streams[i], DR_STREAM_NON_BLOCKING, prio);
	}
	for (int i = 0; i < nevents && r == DR_SUCCESS; i++) {
		r = a->cuEventCreate(&events[i], DR_EVENT_DISABLE_TIMING);
	}
	if (r != DR_SUCCESS) {
		dr_raw_session_close(a, c, streams, nstreams, events, nevents, bufs, kinds, nbufs);
	}
	return r;
}

// CUgraphNodeParams with its conditional arm (CUDA_CONDITIONAL_NODE_PARAMS):
// a 16-byte head, a 232-byte union and 8 reserved bytes.
typedef struct {
	int type; // CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
	int reserved0[3];
	union {
		long long reserved1[29];
		struct {
			uint64_t handle;
			int type;          // CU_GRAPH_COND_TYPE_IF = 0, _WHILE = 1
			unsigned int size; // bodies: 1, or 2 for IF with an else
			CUgraph* phGraph_out;
			CUcontext ctx;
		} cond;
	} u;
	long long reserved2;
} dr_node_params;

_Static_assert(sizeof(dr_node_params) == 256, "CUgraphNodeParams is 256 bytes");

int dr_cond_supported(dr_api* a) {
	return a->cuStreamGetCaptureInfo != NULL && a->cuStreamUpdateCaptureDependencies != NULL &&
	       a->cuStreamBeginCaptureToGraph != NULL && a->cuGraphConditionalHandleCreate != NULL &&
	       a->cuGraphAddNode != NULL;
}

// capture_graph is the graph s is capturing into, and the nodes its next
// work will follow.
static CUresult capture_graph(dr_api* a, CUstream s, CUgraph* g, const CUgraphNode** deps, size_t* n) {
	int status = 0;
	uint64_t id = 0;
	CUresult r = a->cuStreamGetCaptureInfo(s, &status, &id, g, deps, n);
	if (r != DR_SUCCESS) return r;
	return status == 1 ? DR_SUCCESS : 901; // CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: not capturing
}

CUresult dr_cond_handle(dr_api* a, CUcontext c, CUstream s, uint64_t* h) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	CUgraph g = NULL;
	const CUgraphNode* deps = NULL;
	size_t n = 0;
	r = capture_graph(a, s, &g, &deps, &n);
	if (r != DR_SUCCESS) return r;
	return a->cuGraphConditionalHandleCreate(h, g, c, 0, 0);
}

CUresult dr_cond_node(dr_api* a, CUcontext c, CUstream s, uint64_t h, int type, int size, CUgraph* bodies) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	CUgraph g = NULL;
	const CUgraphNode* deps = NULL;
	size_t n = 0;
	r = capture_graph(a, s, &g, &deps, &n);
	if (r != DR_SUCCESS) return r;
	dr_node_params p;
	memset(&p, 0, sizeof(p));
	p.type = 13;
	p.u.cond.handle = h;
	p.u.cond.type = type;
	p.u.cond.size = (unsigned int)size;
	p.u.cond.ctx = c;
	CUgraphNode node = NULL;
	r = a->cuGraphAddNode(&node, g, deps, n, &p);
	if (r != DR_SUCCESS) return r;
	for (int i = 0; i < size; i++) {
		bodies[i] = p.u.cond.phGraph_out[i];
	}
	return a->cuStreamUpdateCaptureDependencies(s, &node, 1, 1); // CU_STREAM_SET_CAPTURE_DEPENDENCIES
}

CUresult dr_capture_to_graph(dr_api* a, CUcontext c, CUstream s, CUgraph g) {
	WITH_CTX(a->cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, DR_STREAM_CAPTURE_MODE_RELAXED));
}
