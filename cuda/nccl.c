#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "nccl.h"

typedef struct {
	size_t offset;
	const char* name;
} dr_nccl_sym;

#define NSLOT(field) {offsetof(dr_nccl, field), #field}

static const dr_nccl_sym dr_nccl_syms[] = {
	NSLOT(ncclGetVersion),    NSLOT(ncclGetUniqueId),       NSLOT(ncclCommInitRank),   NSLOT(ncclCommInitAll),
	NSLOT(ncclCommDestroy),   NSLOT(ncclCommAbort),         NSLOT(ncclCommGetAsyncError), NSLOT(ncclGetErrorString),
	NSLOT(ncclGroupStart),    NSLOT(ncclGroupEnd),          NSLOT(ncclAllReduce),      NSLOT(ncclAllGather),
	NSLOT(ncclReduceScatter), NSLOT(ncclBroadcast),         NSLOT(ncclSend),           NSLOT(ncclRecv),
};

int dr_nccl_load(dr_nccl* n, const char* path, const char** missing) {
	memset(n, 0, sizeof(*n));
	n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (n->lib == NULL) {
		*missing = dlerror();
		return -1;
	}
	for (size_t i = 0; i < sizeof(dr_nccl_syms) / sizeof(dr_nccl_syms[0]); i++) {
		void* p = dlsym(n->lib, dr_nccl_syms[i].name);
		if (p == NULL) {
			*missing = dr_nccl_syms[i].name;
			dlclose(n->lib);
			n->lib = NULL;
			return 1;
		}
		memcpy((char*)n + dr_nccl_syms[i].offset, &p, sizeof(p));
	}
	n->ncclCommInitRankConfig = dlsym(n->lib, "ncclCommInitRankConfig");
	return 0;
}

void dr_nccl_unload(dr_nccl* n) {
	if (n->lib != NULL) {
		dlclose(n->lib);
	}
	memset(n, 0, sizeof(*n));
}

#define SENDP(c) ((const void*)(uintptr_t)(c)->send)
#define RECVP(c) ((void*)(uintptr_t)(c)->recv)

static ncclResult_t dr_nccl_issue(dr_nccl* n, const dr_nccl_call* c) {
	switch (c->kind) {
	case DR_NCCL_CALL_ALL_REDUCE:
		return n->ncclAllReduce(SENDP(c), RECVP(c), c->count, c->dtype, c->op, c->comm, c->stream);
	case DR_NCCL_CALL_ALL_GATHER:
		return n->ncclAllGather(SENDP(c), RECVP(c), c->count, c->dtype, c->comm, c->stream);
	case DR_NCCL_CALL_REDUCE_SCATTER:
		return n->ncclReduceScatter(SENDP(c), RECVP(c), c->count, c->dtype, c->op, c->comm, c->stream);
	case DR_NCCL_CALL_BROADCAST:
		return n->ncclBroadcast(SENDP(c), RECVP(c), c->count, c->dtype, c->arg, c->comm, c->stream);
	case DR_NCCL_CALL_SEND:
		return n->ncclSend(SENDP(c), c->count, c->dtype, c->arg, c->comm, c->stream);
	case DR_NCCL_CALL_RECV:
		return n->ncclRecv(RECVP(c), c->count, c->dtype, c->arg, c->comm, c->stream);
	}
	return DR_NCCL_INVALID_ARGUMENT;
}

ncclResult_t dr_nccl_group(dr_nccl* n, const dr_nccl_call* calls, int ncalls, int* failed) {
	*failed = -1;
	if (ncalls == 1) {
		ncclResult_t r = dr_nccl_issue(n, &calls[0]);
		if (r != DR_NCCL_SUCCESS) {
			*failed = 0;
		}
		return r;
	}
	ncclResult_t r = n->ncclGroupStart();
	if (r != DR_NCCL_SUCCESS) {
		return r;
	}
	for (int i = 0; i < ncalls; i++) {
		r = dr_nccl_issue(n, &calls[i]);
		if (r != DR_NCCL_SUCCESS) {
			*failed = i;
			n->ncclGroupEnd();
			return r;
		}
	}
	return n->ncclGroupEnd();
}

ncclResult_t dr_nccl_init_rank(dr_api* a, CUcontext c, dr_nccl* n, ncclComm_t* comm, int nranks, const dr_nccl_uid* id, int rank,
                               dr_nccl_config* cfg) {
	CUresult cr = dr_ctx(a, c);
	if (cr != DR_SUCCESS) {
		return DR_NCCL_UNHANDLED_CUDA_ERROR;
	}
	if (cfg != NULL) {
		return n->ncclCommInitRankConfig(comm, nranks, *id, rank, cfg);
	}
	return n->ncclCommInitRank(comm, nranks, *id, rank);
}

ncclResult_t dr_nccl_raw_all_reduce(dr_nccl* n, const dr_nccl_call* calls, int ncalls, int iters) {
	for (int i = 0; i < iters; i++) {
		if (ncalls > 1) {
			ncclResult_t r = n->ncclGroupStart();
			if (r != DR_NCCL_SUCCESS) {
				return r;
			}
		}
		for (int j = 0; j < ncalls; j++) {
			const dr_nccl_call* c = &calls[j];
			ncclResult_t r = n->ncclAllReduce(SENDP(c), RECVP(c), c->count, c->dtype, c->op, c->comm, c->stream);
			if (r != DR_NCCL_SUCCESS) {
				if (ncalls > 1) {
					n->ncclGroupEnd();
				}
				return r;
			}
		}
		if (ncalls > 1) {
			ncclResult_t r = n->ncclGroupEnd();
			if (r != DR_NCCL_SUCCESS) {
				return r;
			}
		}
	}
	return DR_NCCL_SUCCESS;
}
