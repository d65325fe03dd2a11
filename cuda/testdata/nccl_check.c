// Prints every value and size that dagrun's NCCL binding (cuda/nccl.h), its
// peer helpers (cuda/peer.go) and pool measure (cuda/poolwatch.go) declare
// by hand, taken from the real headers: TestNCCLHeader compares them.
// Built on the GPU machine only:
//   gcc -I/usr/local/cuda/include nccl_check.c -o nccl_check
#include <stddef.h>
#include <stdio.h>
#include <nccl.h>
#ifdef HAVE_CUDA_H
#include <cuda.h>
#endif

#define V(x) printf("%s %d\n", #x, (int)(x))
#define S(t) printf("sizeof(%s) %d\n", #t, (int)sizeof(t))

int main(void) {
	S(ncclUniqueId);
	S(ncclResult_t);
	S(ncclRedOp_t);
	S(ncclDataType_t);
	V(ncclSuccess);
	V(ncclUnhandledCudaError);
	V(ncclSystemError);
	V(ncclInternalError);
	V(ncclInvalidArgument);
	V(ncclInvalidUsage);
	V(ncclRemoteError);
	V(ncclInProgress);
	V(ncclSum);
	V(ncclProd);
	V(ncclMax);
	V(ncclMin);
	V(ncclAvg);
	V(ncclInt8);
	V(ncclUint8);
	V(ncclInt32);
	V(ncclUint32);
	V(ncclInt64);
	V(ncclUint64);
	V(ncclFloat16);
	V(ncclFloat32);
	V(ncclFloat64);
	V(ncclBfloat16);
	V(NCCL_MAJOR);
	// The prefix of ncclConfig_t that dr_nccl_config declares.
	V(NCCL_CONFIG_UNDEF_INT);
	V(offsetof(ncclConfig_t,blocking));
	V(offsetof(ncclConfig_t,cgaClusterSize));
	V(offsetof(ncclConfig_t,minCTAs));
	V(offsetof(ncclConfig_t,maxCTAs));
	V(offsetof(ncclConfig_t,netName));
	V(offsetof(ncclConfig_t,splitShare));
#ifdef HAVE_CUDA_H
	S(CUmemAccessDesc);
	V(CU_MEM_LOCATION_TYPE_DEVICE);
	V(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	V(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	// The pool's and the graph allocator's attributes (cuda/poolwatch.go).
	S(cuuint64_t);
	V(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
	V(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
	V(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
	V(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
	V(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
	V(CU_MEMPOOL_ATTR_USED_MEM_HIGH);
	V(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
	V(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
	V(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
	V(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
#endif
	return 0;
}
