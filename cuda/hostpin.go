package cuda

/*
#include <stdint.h>
#include <sys/mman.h>
#include "cuda.h"

#define DR_HUGE_PAGE ((size_t)2 << 20)

// w_host_map pins n bytes of anonymous memory that the kernel backs with
// transparent huge pages: mapped 2 MiB-aligned, advised, then registered
// with the driver (portable, device-mapped, as cuMemHostAlloc's). Pinning
// is the kernel's work page by page: on the H100's host 32 MiB took 5.6 ms
// this way against 13 ms from cuMemHostAlloc.
static CUresult w_host_map(dr_api* a, CUcontext c, void** p, size_t n) {
	*p = NULL;
	size_t len = (n + DR_HUGE_PAGE - 1) & ~(DR_HUGE_PAGE - 1);
	char* m = mmap(NULL, len + DR_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) return 2; // CUDA_ERROR_OUT_OF_MEMORY
	char* b = (char*)(((uintptr_t)m + DR_HUGE_PAGE - 1) & ~(uintptr_t)(DR_HUGE_PAGE - 1));
	if (b > m) munmap(m, b - m);
	if (m + len + DR_HUGE_PAGE > b + len) munmap(b + len, (m + len + DR_HUGE_PAGE) - (b + len));
	madvise(b, len, MADV_HUGEPAGE);
	CUresult r = dr_ctx(a, c);
	if (r == DR_SUCCESS) r = a->cuMemHostRegister(b, len, DR_MEMHOSTALLOC_PORTABLE | DR_MEMHOSTALLOC_DEVICEMAP);
	if (r != DR_SUCCESS) {
		munmap(b, len);
		return r;
	}
	*p = b;
	return DR_SUCCESS;
}

static CUresult w_host_unmap(dr_api* a, CUcontext c, void* p, size_t n) {
	size_t len = (n + DR_HUGE_PAGE - 1) & ~(DR_HUGE_PAGE - 1);
	CUresult r = dr_ctx(a, c);
	if (r == DR_SUCCESS) r = a->cuMemHostUnregister(p);
	if (r == DR_SUCCESS) munmap(p, len);
	return r;
}
*/
import "C"

import (
	"os"
	"strings"
	"sync"
	"unsafe"
)

// hugePinMin is the smallest pinned buffer taken from huge pages: below
// it, rounding up to a 2 MiB page would waste more than pinning costs.
const hugePinMin = 2 << 20

// hostPins tells pinned host memory of dagrun's own mapping (huge pages,
// registered) from cuMemHostAlloc's, which are freed differently.
type hostPins struct {
	once   sync.Once
	usable bool // transparent huge pages, registration, and device access at the host's address
	mu     sync.Mutex
	mapped map[unsafe.Pointer]int64 // dagrun's mappings and their sizes
}

// hugeUsable says whether big pinned buffers can come from huge pages:
// the kernel offers them (not "[never]"), the driver registers memory,
// and every device reads registered memory at the host's address, as it
// reads cuMemHostAlloc's.
func (d *driver) hugeUsable() bool {
	hp := &d.pins
	hp.once.Do(func() {
		thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if err != nil || strings.Contains(string(thp), "[never]") || d.api.cuMemHostRegister == nil || d.api.cuMemHostUnregister == nil {
			return
		}
		n, err := d.deviceCount()
		if err != nil || n < 1 {
			return
		}
		for i := range n {
			info, err := d.device(i)
			if err != nil {
				return
			}
			if v, err := d.deviceAttr(info.dev, C.DR_ATTR_HOST_POINTER_FOR_REGISTERED_MEM); err != nil || v != 1 {
				return
			}
		}
		hp.usable = true
	})
	return hp.usable
}

// hostAlloc allocates pinned host memory, portable to every context and
// mapped into the device address space: from huge pages when it is big
// and they can be had, else from cuMemHostAlloc.
func (d *driver) hostAlloc(c C.CUcontext, n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if n >= hugePinMin && d.hugeUsable() {
		if C.w_host_map(d.api, c, &p, C.size_t(n)) == C.DR_SUCCESS {
			d.pins.mu.Lock()
			if d.pins.mapped == nil {
				d.pins.mapped = map[unsafe.Pointer]int64{}
			}
			d.pins.mapped[p] = n
			d.pins.mu.Unlock()
			return p, nil
		}
		// Registration refused (a locked-memory limit, say): the driver's
		// own allocation may still succeed.
	}
	return d.memHostAlloc(c, n)
}

// hostFree frees what hostAlloc returned.
func (d *driver) hostFree(c C.CUcontext, p unsafe.Pointer) error {
	d.pins.mu.Lock()
	n, mine := d.pins.mapped[p]
	if mine {
		delete(d.pins.mapped, p)
	}
	d.pins.mu.Unlock()
	if mine {
		return d.check("cuMemHostUnregister", C.w_host_unmap(d.api, c, p, C.size_t(n)))
	}
	return d.memFreeHost(c, p)
}
