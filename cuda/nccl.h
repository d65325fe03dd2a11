// Hand-declared subset of NCCL 2 (nccl.h of NCCL 2.28), loaded with dlopen
// at run time: dagrun builds without NCCL's headers. testdata/nccl_check.c
// compares every value and size declared here with the real nccl.h on the
// GPU machine (TestNCCLHeader). NCCL's enums are C enums: int-sized.
#ifndef DAGRUN_NCCL_H
#define DAGRUN_NCCL_H

#include <stddef.h>
#include "cuda.h"

typedef int ncclResult_t;
typedef struct ncclComm* ncclComm_t;

enum {
	DR_NCCL_UNIQUE_ID_BYTES = 128,
	// ncclResult_t
	DR_NCCL_SUCCESS = 0,
	DR_NCCL_UNHANDLED_CUDA_ERROR = 1,
	DR_NCCL_SYSTEM_ERROR = 2,
	DR_NCCL_INTERNAL_ERROR = 3,
	DR_NCCL_INVALID_ARGUMENT = 4,
	DR_NCCL_INVALID_USAGE = 5,
	DR_NCCL_REMOTE_ERROR = 6,
	DR_NCCL_IN_PROGRESS = 7,
	// ncclRedOp_t
	DR_NCCL_SUM = 0,
	DR_NCCL_PROD = 1,
	DR_NCCL_MAX = 2,
	DR_NCCL_MIN = 3,
	DR_NCCL_AVG = 4,
	// ncclDataType_t
	DR_NCCL_INT8 = 0,
	DR_NCCL_UINT8 = 1,
	DR_NCCL_INT32 = 2,
	DR_NCCL_UINT32 = 3,
	DR_NCCL_INT64 = 4,
	DR_NCCL_UINT64 = 5,
	DR_NCCL_FLOAT16 = 6,
	DR_NCCL_FLOAT32 = 7,
	DR_NCCL_FLOAT64 = 8,
	DR_NCCL_BFLOAT16 = 9,
	// What a dr_nccl_call does.
	DR_NCCL_CALL_ALL_REDUCE = 0,
	DR_NCCL_CALL_ALL_GATHER = 1,
	DR_NCCL_CALL_REDUCE_SCATTER = 2,
	DR_NCCL_CALL_BROADCAST = 3,
	DR_NCCL_CALL_SEND = 4,
	DR_NCCL_CALL_RECV = 5,
};

typedef struct { char internal[DR_NCCL_UNIQUE_ID_BYTES]; } dr_nccl_uid;

// The leading fields of ncclConfig_t as NCCL 2.17 declared them. NCCL reads
// a config as long as its size says and as new as its version says, and
// keeps its defaults for the rest, so this prefix stays valid in later
// versions. DR_NCCL_CONFIG_UNDEF leaves a field at NCCL's default.
typedef struct {
	size_t size;
	unsigned int magic;   // DR_NCCL_API_MAGIC
	unsigned int version; // DR_NCCL_CONFIG_VERSION
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char* netName;
	int splitShare;
} dr_nccl_config;

#define DR_NCCL_API_MAGIC 0xcafebeefu
#define DR_NCCL_CONFIG_VERSION 21700 // NCCL_VERSION(2, 17, 0)
#define DR_NCCL_CONFIG_UNDEF (-2147483647 - 1) // INT_MIN

typedef struct dr_nccl {
	void* lib;
	ncclResult_t (*ncclGetVersion)(int*);
	ncclResult_t (*ncclGetUniqueId)(dr_nccl_uid*);
	ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, dr_nccl_uid, int);
	ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*);
	ncclResult_t (*ncclCommDestroy)(ncclComm_t);
	ncclResult_t (*ncclCommAbort)(ncclComm_t);
	ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
	const char* (*ncclGetErrorString)(ncclResult_t);
	ncclResult_t (*ncclGroupStart)(void);
	ncclResult_t (*ncclGroupEnd)(void);
	ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
	ncclResult_t (*ncclAllGather)(const void*, void*, size_t, int, ncclComm_t, CUstream);
	ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
	ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
	ncclResult_t (*ncclSend)(const void*, size_t, int, int, ncclComm_t, CUstream);
	ncclResult_t (*ncclRecv)(void*, size_t, int, int, ncclComm_t, CUstream);
	// Optional (NCCL 2.14 and later; NULL when the library lacks it).
	ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t*, int, dr_nccl_uid, int, dr_nccl_config*);
} dr_nccl;

// dr_nccl_load opens NCCL and fills n; it returns 0, or 1 with *missing set
// to a symbol the library lacks, or -1 when no library opened (dlerror text
// in *missing).
int dr_nccl_load(dr_nccl* n, const char* path, const char** missing);
void dr_nccl_unload(dr_nccl* n);

// One NCCL call of a group. count is in elements: of send for all_gather,
// of recv for reduce_scatter, of the buffer otherwise. arg is the root of a
// broadcast or the peer of a send or recv.
typedef struct {
	int kind;
	CUdeviceptr send;
	CUdeviceptr recv;
	size_t count;
	int dtype;
	int op;
	int arg;
	ncclComm_t comm;
	CUstream stream;
} dr_nccl_call;

// dr_nccl_group issues calls between ncclGroupStart and ncclGroupEnd; a
// single call goes alone, as the raw loops it is measured against call it
// (a group of one measured the same). *failed is the index of the call
// that failed, or -1 (the group end).
ncclResult_t dr_nccl_group(dr_nccl* n, const dr_nccl_call* calls, int ncalls, int* failed);
// dr_nccl_init_rank makes c current and creates this thread's rank of a
// communicator (ncclCommInitRank takes the current device), with cfg
// through ncclCommInitRankConfig when cfg is not NULL.
ncclResult_t dr_nccl_init_rank(dr_api* a, CUcontext c, dr_nccl* n, ncclComm_t* comm, int nranks, const dr_nccl_uid* id, int rank,
                               dr_nccl_config* cfg);
// dr_nccl_raw_all_reduce calls ncclAllReduce for every call (grouped when
// there are several) iters times from one C loop: the floor the binding's
// benchmarks compare with.
ncclResult_t dr_nccl_raw_all_reduce(dr_nccl* n, const dr_nccl_call* calls, int ncalls, int iters);

#endif
