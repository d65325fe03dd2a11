// Checks every size, offset and enum value that dagrun's cupti.h declares
// against the real CUPTI headers. Built and run by TestCUPTILayouts:
//   gcc -I/usr/local/cuda/include cupti_check.c
// It prints one line per mismatch and exits 1 if there is any.
#include <stddef.h>
#include <stdio.h>

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_version.h>

#define DAGRUN_CUDA_H // the real cuda.h, included above, declares what cupti.h needs
typedef struct dr_api dr_api; // dagrun's driver table (cuda.h): cupti.h takes it by pointer only
#include "../cupti.h" // relative: the CUPTI include folder has a cupti.h of its own

static int bad;

static void check(const char* what, long long declared, long long real) {
	if (declared != real) {
		printf("MISMATCH %s: cupti.h says %lld, the CUPTI headers %lld\n", what, declared, real);
		bad = 1;
	} else {
		printf("ok %s = %lld\n", what, real);
	}
}

#define SIZE(ours, type) check("sizeof(" #type ")", ours, (long long)sizeof(type))
#define OFF(ours, type, field) check(#type "." #field, ours, (long long)offsetof(type, field))
#define VAL(ours, theirs) check(#theirs, ours, (long long)(theirs))

int main(void) {
	printf("CUPTI_API_VERSION %d\n", CUPTI_API_VERSION);
	check("CUPTI_API_VERSION within the versions the binding knows (1 = yes)", 1,
	      CUPTI_API_VERSION >= 130001 && CUPTI_API_VERSION <= 130001);

	VAL(DR_CUPTI_SUCCESS, CUPTI_SUCCESS);
	VAL(DR_CUPTI_ERROR_NOT_INITIALIZED, CUPTI_ERROR_NOT_INITIALIZED);
	VAL(DR_CUPTI_ERROR_HARDWARE_BUSY, CUPTI_ERROR_HARDWARE_BUSY);
	VAL(DR_CUPTI_ERROR_NOT_SUPPORTED, CUPTI_ERROR_NOT_SUPPORTED);
	VAL(DR_CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
	VAL(DR_CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED, CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED);
	VAL(DR_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	VAL(DR_CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES);

	VAL(DR_CUPTI_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY);
	VAL(DR_CUPTI_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMCPY2);
	VAL(DR_CUPTI_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET);
	VAL(DR_CUPTI_KIND_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL);
	VAL(DR_CUPTI_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	VAL(DR_CUPTI_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
	VAL(DR_CUPTI_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_MEMORY_POOL);
	VAL(DR_CUPTI_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	VAL(DR_CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
	VAL(DR_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	VAL(DR_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER);

	VAL(DR_CUPTI_CBID_cuMemsetD8Async, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async);
	VAL(DR_CUPTI_CBID_cuMemsetD16Async, CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async);
	VAL(DR_CUPTI_CBID_cuMemsetD32Async, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async);
	VAL(DR_CUPTI_CBID_cuMemsetD8_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2);
	VAL(DR_CUPTI_CBID_cuMemcpyHtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2);
	VAL(DR_CUPTI_CBID_cuMemcpyAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync);
	VAL(DR_CUPTI_CBID_cuMemcpyHtoDAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2);
	VAL(DR_CUPTI_CBID_cuMemcpyDtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2);
	VAL(DR_CUPTI_CBID_cuMemcpyDtoHAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2);
	VAL(DR_CUPTI_CBID_cuMemcpyDtoDAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2);
	VAL(DR_CUPTI_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
	VAL(DR_CUPTI_CBID_cuMemcpyPeerAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync);
	VAL(DR_CUPTI_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
	VAL(DR_CUPTI_CBID_cuLaunchHostFunc, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc);
	VAL(DR_CUPTI_CBID_cuMemAllocAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync);
	VAL(DR_CUPTI_CBID_cuMemFreeAsync, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync);
	VAL(DR_CUPTI_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);

	VAL(DR_CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_RESOURCE);
	VAL(DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
	VAL(DR_CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
	OFF(DR_CUPTI_RESOURCEDATA_DESCRIPTOR, CUpti_ResourceData, resourceDescriptor);
	OFF(DR_CUPTI_GRAPHDATA_NODE, CUpti_GraphData, node);
	OFF(DR_CUPTI_GRAPHDATA_ORIGINAL_NODE, CUpti_GraphData, originalNode);
	VAL(DR_CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_DRIVER_API);
	VAL(DR_CUPTI_API_ENTER, CUPTI_API_ENTER);
	OFF(DR_CUPTI_CALLBACKDATA_SITE, CUpti_CallbackData, callbackSite);
	OFF(DR_CUPTI_CALLBACKDATA_CORRELATION_ID, CUpti_CallbackData, correlationId);
	check("sizeof(CUpti_CallbackData.correlationId)", 4, sizeof(((CUpti_CallbackData*)0)->correlationId));
	check("sizeof(CUpti_CallbackSite)", 4, sizeof(CUpti_ApiCallbackSite));
	check("sizeof(CUpti_CallbackId)", 4, sizeof(CUpti_CallbackId));
	check("sizeof(CUpti_CallbackDomain)", 4, sizeof(CUpti_CallbackDomain));

	SIZE(DR_CUPTI_KERNEL10_SIZE, CUpti_ActivityKernel10);
	OFF(DR_CUPTI_KERNEL10_START, CUpti_ActivityKernel10, start);
	OFF(DR_CUPTI_KERNEL10_END, CUpti_ActivityKernel10, end);
	OFF(DR_CUPTI_KERNEL10_DEVICE_ID, CUpti_ActivityKernel10, deviceId);
	OFF(DR_CUPTI_KERNEL10_CONTEXT_ID, CUpti_ActivityKernel10, contextId);
	OFF(DR_CUPTI_KERNEL10_STREAM_ID, CUpti_ActivityKernel10, streamId);
	OFF(DR_CUPTI_KERNEL10_CORRELATION_ID, CUpti_ActivityKernel10, correlationId);
	OFF(DR_CUPTI_KERNEL10_GRAPH_NODE_ID, CUpti_ActivityKernel10, graphNodeId);
	OFF(DR_CUPTI_KERNEL10_GRAPH_ID, CUpti_ActivityKernel10, graphId);

	SIZE(DR_CUPTI_MEMCPY6_SIZE, CUpti_ActivityMemcpy6);
	OFF(DR_CUPTI_MEMCPY6_COPY_KIND, CUpti_ActivityMemcpy6, copyKind);
	OFF(DR_CUPTI_MEMCPY6_BYTES, CUpti_ActivityMemcpy6, bytes);
	OFF(DR_CUPTI_MEMCPY6_START, CUpti_ActivityMemcpy6, start);
	OFF(DR_CUPTI_MEMCPY6_END, CUpti_ActivityMemcpy6, end);
	OFF(DR_CUPTI_MEMCPY6_DEVICE_ID, CUpti_ActivityMemcpy6, deviceId);
	OFF(DR_CUPTI_MEMCPY6_CONTEXT_ID, CUpti_ActivityMemcpy6, contextId);
	OFF(DR_CUPTI_MEMCPY6_STREAM_ID, CUpti_ActivityMemcpy6, streamId);
	OFF(DR_CUPTI_MEMCPY6_CORRELATION_ID, CUpti_ActivityMemcpy6, correlationId);
	OFF(DR_CUPTI_MEMCPY6_GRAPH_NODE_ID, CUpti_ActivityMemcpy6, graphNodeId);
	OFF(DR_CUPTI_MEMCPY6_GRAPH_ID, CUpti_ActivityMemcpy6, graphId);
	check("sizeof(CUpti_ActivityMemcpy6.copyKind)", 1, sizeof(((CUpti_ActivityMemcpy6*)0)->copyKind));

	SIZE(DR_CUPTI_PTOP4_SIZE, CUpti_ActivityMemcpyPtoP4);
	OFF(DR_CUPTI_PTOP4_COPY_KIND, CUpti_ActivityMemcpyPtoP4, copyKind);
	OFF(DR_CUPTI_PTOP4_BYTES, CUpti_ActivityMemcpyPtoP4, bytes);
	OFF(DR_CUPTI_PTOP4_START, CUpti_ActivityMemcpyPtoP4, start);
	OFF(DR_CUPTI_PTOP4_END, CUpti_ActivityMemcpyPtoP4, end);
	OFF(DR_CUPTI_PTOP4_DEVICE_ID, CUpti_ActivityMemcpyPtoP4, deviceId);
	OFF(DR_CUPTI_PTOP4_CONTEXT_ID, CUpti_ActivityMemcpyPtoP4, contextId);
	OFF(DR_CUPTI_PTOP4_STREAM_ID, CUpti_ActivityMemcpyPtoP4, streamId);
	OFF(DR_CUPTI_PTOP4_CORRELATION_ID, CUpti_ActivityMemcpyPtoP4, correlationId);
	OFF(DR_CUPTI_PTOP4_GRAPH_NODE_ID, CUpti_ActivityMemcpyPtoP4, graphNodeId);
	OFF(DR_CUPTI_PTOP4_GRAPH_ID, CUpti_ActivityMemcpyPtoP4, graphId);
	check("sizeof(CUpti_ActivityMemcpyPtoP4.copyKind)", 1, sizeof(((CUpti_ActivityMemcpyPtoP4*)0)->copyKind));

	SIZE(DR_CUPTI_MEMSET4_SIZE, CUpti_ActivityMemset4);
	OFF(DR_CUPTI_MEMSET4_BYTES, CUpti_ActivityMemset4, bytes);
	OFF(DR_CUPTI_MEMSET4_START, CUpti_ActivityMemset4, start);
	OFF(DR_CUPTI_MEMSET4_END, CUpti_ActivityMemset4, end);
	OFF(DR_CUPTI_MEMSET4_DEVICE_ID, CUpti_ActivityMemset4, deviceId);
	OFF(DR_CUPTI_MEMSET4_CONTEXT_ID, CUpti_ActivityMemset4, contextId);
	OFF(DR_CUPTI_MEMSET4_STREAM_ID, CUpti_ActivityMemset4, streamId);
	OFF(DR_CUPTI_MEMSET4_CORRELATION_ID, CUpti_ActivityMemset4, correlationId);
	OFF(DR_CUPTI_MEMSET4_GRAPH_NODE_ID, CUpti_ActivityMemset4, graphNodeId);
	OFF(DR_CUPTI_MEMSET4_GRAPH_ID, CUpti_ActivityMemset4, graphId);

	SIZE(DR_CUPTI_EXTCORR_SIZE, CUpti_ActivityExternalCorrelation);
	OFF(DR_CUPTI_EXTCORR_EXTERNAL_KIND, CUpti_ActivityExternalCorrelation, externalKind);
	OFF(DR_CUPTI_EXTCORR_EXTERNAL_ID, CUpti_ActivityExternalCorrelation, externalId);
	OFF(DR_CUPTI_EXTCORR_CORRELATION_ID, CUpti_ActivityExternalCorrelation, correlationId);

	SIZE(DR_CUPTI_GRAPHTRACE2_SIZE, CUpti_ActivityGraphTrace2);
	OFF(DR_CUPTI_GRAPHTRACE2_CORRELATION_ID, CUpti_ActivityGraphTrace2, correlationId);
	OFF(DR_CUPTI_GRAPHTRACE2_START, CUpti_ActivityGraphTrace2, start);
	OFF(DR_CUPTI_GRAPHTRACE2_END, CUpti_ActivityGraphTrace2, end);
	OFF(DR_CUPTI_GRAPHTRACE2_DEVICE_ID, CUpti_ActivityGraphTrace2, deviceId);
	OFF(DR_CUPTI_GRAPHTRACE2_GRAPH_ID, CUpti_ActivityGraphTrace2, graphId);
	OFF(DR_CUPTI_GRAPHTRACE2_CONTEXT_ID, CUpti_ActivityGraphTrace2, contextId);
	OFF(DR_CUPTI_GRAPHTRACE2_STREAM_ID, CUpti_ActivityGraphTrace2, streamId);

	SIZE(DR_CUPTI_MEMPOOL3_SIZE, CUpti_ActivityMemoryPool3);
	OFF(DR_CUPTI_MEMPOOL3_OPERATION_TYPE, CUpti_ActivityMemoryPool3, memoryPoolOperationType);
	OFF(DR_CUPTI_MEMPOOL3_CORRELATION_ID, CUpti_ActivityMemoryPool3, correlationId);
	OFF(DR_CUPTI_MEMPOOL3_DEVICE_ID, CUpti_ActivityMemoryPool3, deviceId);
	OFF(DR_CUPTI_MEMPOOL3_SIZE_FIELD, CUpti_ActivityMemoryPool3, size);
	OFF(DR_CUPTI_MEMPOOL3_TIMESTAMP, CUpti_ActivityMemoryPool3, timestamp);
	OFF(DR_CUPTI_MEMPOOL3_UTILIZED_SIZE, CUpti_ActivityMemoryPool3, utilizedSize);

	// The sizes of the fields read as 32 and 64 bits.
	check("sizeof(CUpti_ActivityKernel10.correlationId)", 4, sizeof(((CUpti_ActivityKernel10*)0)->correlationId));
	check("sizeof(CUpti_ActivityKernel10.graphNodeId)", 8, sizeof(((CUpti_ActivityKernel10*)0)->graphNodeId));
	check("sizeof(CUpti_ActivityMemoryPool3.memoryPoolOperationType)", 4,
	      sizeof(((CUpti_ActivityMemoryPool3*)0)->memoryPoolOperationType));
	check("sizeof(CUpti_ActivityExternalCorrelation.externalKind)", 4,
	      sizeof(((CUpti_ActivityExternalCorrelation*)0)->externalKind));
	return bad;
}
