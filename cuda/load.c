// The driver's entry points: libcuda opened with dlopen and each symbol
// looked up by name into the dr_api table (cuda.h), so that dagrun builds
// without the CUDA SDK and runs on whatever driver is installed.
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "cuda.h"

// Each entry names the table slot and the symbols to try, newest first.
typedef struct {
	size_t offset;
	const char* names[3];
	int required;
} dr_sym;

#define SLOT(field) offsetof(dr_api, field)

static const dr_sym dr_syms[] = {
	{SLOT(cuInit), {"cuInit"}, 1},
	{SLOT(cuDriverGetVersion), {"cuDriverGetVersion"}, 1},
	{SLOT(cuDeviceGetCount), {"cuDeviceGetCount"}, 1},
	{SLOT(cuDeviceGet), {"cuDeviceGet"}, 1},
	{SLOT(cuDeviceGetName), {"cuDeviceGetName"}, 1},
	{SLOT(cuDeviceGetAttribute), {"cuDeviceGetAttribute"}, 1},
	{SLOT(cuDevicePrimaryCtxRetain), {"cuDevicePrimaryCtxRetain"}, 1},
	{SLOT(cuDevicePrimaryCtxRelease), {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, 1},
	{SLOT(cuCtxSetCurrent), {"cuCtxSetCurrent"}, 1},
	{SLOT(cuCtxGetCurrent), {"cuCtxGetCurrent"}, 1},
	{SLOT(cuCtxSynchronize), {"cuCtxSynchronize"}, 1},
	{SLOT(cuCtxGetStreamPriorityRange), {"cuCtxGetStreamPriorityRange"}, 1},
	{SLOT(cuMemGetInfo), {"cuMemGetInfo_v2"}, 1},
	{SLOT(cuGetErrorName), {"cuGetErrorName"}, 1},
	{SLOT(cuGetErrorString), {"cuGetErrorString"}, 1},
	{SLOT(cuStreamCreateWithPriority), {"cuStreamCreateWithPriority"}, 1},
	{SLOT(cuStreamDestroy), {"cuStreamDestroy_v2"}, 1},
	{SLOT(cuStreamSynchronize), {"cuStreamSynchronize"}, 1},
	{SLOT(cuStreamQuery), {"cuStreamQuery"}, 1},
	{SLOT(cuStreamWaitEvent), {"cuStreamWaitEvent"}, 1},
	{SLOT(cuEventCreate), {"cuEventCreate"}, 1},
	{SLOT(cuEventDestroy), {"cuEventDestroy_v2"}, 1},
	{SLOT(cuEventRecord), {"cuEventRecord"}, 1},
	{SLOT(cuEventSynchronize), {"cuEventSynchronize"}, 1},
	{SLOT(cuEventElapsedTime), {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, 1},
	{SLOT(cuMemAlloc), {"cuMemAlloc_v2"}, 1},
	{SLOT(cuMemFree), {"cuMemFree_v2"}, 1},
	{SLOT(cuMemAllocAsync), {"cuMemAllocAsync"}, 1},
	{SLOT(cuMemFreeAsync), {"cuMemFreeAsync"}, 1},
	{SLOT(cuMemHostAlloc), {"cuMemHostAlloc"}, 1},
	{SLOT(cuMemFreeHost), {"cuMemFreeHost"}, 1},
	{SLOT(cuDeviceGetDefaultMemPool), {"cuDeviceGetDefaultMemPool"}, 1},
	{SLOT(cuMemPoolSetAttribute), {"cuMemPoolSetAttribute"}, 1},
	{SLOT(cuMemPoolTrimTo), {"cuMemPoolTrimTo"}, 1},
	{SLOT(cuMemcpyHtoD), {"cuMemcpyHtoD_v2"}, 1},
	{SLOT(cuMemcpyDtoH), {"cuMemcpyDtoH_v2"}, 1},
	{SLOT(cuMemcpyHtoDAsync), {"cuMemcpyHtoDAsync_v2"}, 1},
	{SLOT(cuMemcpyDtoHAsync), {"cuMemcpyDtoHAsync_v2"}, 1},
	{SLOT(cuMemcpyDtoDAsync), {"cuMemcpyDtoDAsync_v2"}, 1},
	{SLOT(cuMemcpyPeerAsync), {"cuMemcpyPeerAsync"}, 1},
	{SLOT(cuMemcpyAsync), {"cuMemcpyAsync"}, 1},
	{SLOT(cuMemsetD8), {"cuMemsetD8_v2"}, 1},
	{SLOT(cuMemsetD8Async), {"cuMemsetD8Async"}, 1},
	{SLOT(cuMemsetD16Async), {"cuMemsetD16Async"}, 1},
	{SLOT(cuMemsetD32Async), {"cuMemsetD32Async"}, 1},
	{SLOT(cuMemsetD2D8Async), {"cuMemsetD2D8Async"}, 1},
	{SLOT(cuMemsetD2D16Async), {"cuMemsetD2D16Async"}, 1},
	{SLOT(cuMemsetD2D32Async), {"cuMemsetD2D32Async"}, 1},
	{SLOT(cuModuleLoadData), {"cuModuleLoadData"}, 1},
	{SLOT(cuModuleUnload), {"cuModuleUnload"}, 1},
	{SLOT(cuModuleGetFunction), {"cuModuleGetFunction"}, 1},
	{SLOT(cuLaunchKernel), {"cuLaunchKernel"}, 1},
	{SLOT(cuLaunchHostFunc), {"cuLaunchHostFunc"}, 1},
	{SLOT(cuLaunchKernelEx), {"cuLaunchKernelEx"}, 0},
	{SLOT(cuStreamBeginCapture), {"cuStreamBeginCapture_v2"}, 0},
	{SLOT(cuStreamEndCapture), {"cuStreamEndCapture"}, 0},
	{SLOT(cuStreamIsCapturing), {"cuStreamIsCapturing"}, 0},
	{SLOT(cuGraphInstantiateWithFlags), {"cuGraphInstantiateWithFlags"}, 0},
	{SLOT(cuGraphUpload), {"cuGraphUpload"}, 0},
	{SLOT(cuGraphLaunch), {"cuGraphLaunch"}, 0},
	{SLOT(cuGraphExecDestroy), {"cuGraphExecDestroy"}, 0},
	{SLOT(cuGraphDestroy), {"cuGraphDestroy"}, 0},
	{SLOT(cuGraphGetNodes), {"cuGraphGetNodes"}, 0},
	{SLOT(cuGraphNodeGetType), {"cuGraphNodeGetType"}, 0},
	{SLOT(cuGraphExecKernelNodeSetParams), {"cuGraphExecKernelNodeSetParams"}, 0},
	{SLOT(cuGraphExecUpdateV2), {"cuGraphExecUpdate_v2"}, 0},
	{SLOT(cuGraphExecUpdateV1), {"cuGraphExecUpdate"}, 0},
	{SLOT(cuGraphCreate), {"cuGraphCreate"}, 0},
	{SLOT(cuGraphAddKernelNode), {"cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"}, 0},
	{SLOT(cuDeviceCanAccessPeer), {"cuDeviceCanAccessPeer"}, 0},
	{SLOT(cuCtxEnablePeerAccess), {"cuCtxEnablePeerAccess"}, 0},
	{SLOT(cuMemPoolSetAccess), {"cuMemPoolSetAccess"}, 0},
	{SLOT(cuFuncLoad), {"cuFuncLoad"}, 0},
	{SLOT(cuFuncGetAttribute), {"cuFuncGetAttribute"}, 0},
	{SLOT(cuMemPoolGetAttribute), {"cuMemPoolGetAttribute"}, 0},
	{SLOT(cuDeviceGetGraphMemAttribute), {"cuDeviceGetGraphMemAttribute"}, 0},
	{SLOT(cuDeviceSetGraphMemAttribute), {"cuDeviceSetGraphMemAttribute"}, 0},
	{SLOT(cuStreamGetCaptureInfo), {"cuStreamGetCaptureInfo_v2"}, 0},
	{SLOT(cuStreamUpdateCaptureDependencies), {"cuStreamUpdateCaptureDependencies"}, 0},
	{SLOT(cuStreamBeginCaptureToGraph), {"cuStreamBeginCaptureToGraph"}, 0},
	{SLOT(cuGraphConditionalHandleCreate), {"cuGraphConditionalHandleCreate"}, 0},
	{SLOT(cuGraphAddNode), {"cuGraphAddNode"}, 0},
	{SLOT(cuMemHostRegister), {"cuMemHostRegister_v2", "cuMemHostRegister"}, 0},
	{SLOT(cuMemHostUnregister), {"cuMemHostUnregister"}, 0},
	{SLOT(cuStreamWaitValue32), {"cuStreamWaitValue32_v2", "cuStreamWaitValue32"}, 0},
	{SLOT(cuStreamWriteValue32), {"cuStreamWriteValue32_v2", "cuStreamWriteValue32"}, 0},
};

int dr_load(dr_api* a, const char* path, const char** missing) {
	memset(a, 0, sizeof(*a));
	a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (a->lib == NULL) {
		*missing = dlerror();
		return -1;
	}
	for (size_t i = 0; i < sizeof(dr_syms) / sizeof(dr_syms[0]); i++) {
		const dr_sym* s = &dr_syms[i];
		void* p = NULL;
		for (int j = 0; j < 3 && s->names[j] != NULL && p == NULL; j++) {
			p = dlsym(a->lib, s->names[j]);
		}
		if (p == NULL && s->required) {
			*missing = s->names[0];
			dlclose(a->lib);
			a->lib = NULL;
			return 1;
		}
		memcpy((char*)a + s->offset, &p, sizeof(p));
	}
	return 0;
}

void dr_unload(dr_api* a) {
	if (a->lib != NULL) {
		dlclose(a->lib);
	}
	memset(a, 0, sizeof(*a));
}
