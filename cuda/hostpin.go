package cuda

/*
#include <stdint.h>
#include <sys/mman.h>
#include "cuda.h"

#define DR_HUGE_PAGE ((size_t)2 << 20)

// w_host_reserve maps n bytes (rounded up to huge pages) of anonymous
// memory, 2 MiB-aligned and advised to be backed by transparent huge pages:
// host work only, no driver call, so it can run before a context exists.
// It reads zero until written.
static void* w_host_reserve(size_t n) {
	size_t len = (n + DR_HUGE_PAGE - 1) & ~(DR_HUGE_PAGE - 1);
	char* m = mmap(NULL, len + DR_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) return NULL;
	char* b = (char*)(((uintptr_t)m + DR_HUGE_PAGE - 1) & ~(uintptr_t)(DR_HUGE_PAGE - 1));
	if (b > m) munmap(m, b - m);
	if (m + len + DR_HUGE_PAGE > b + len) munmap(b + len, (m + len + DR_HUGE_PAGE) - (b + len));
	madvise(b, len, MADV_HUGEPAGE);
	return b;
}

// w_host_fault makes the pages of a fresh mapping (zero: the kernel's
// zeroing is the work), writing a zero to each 4 KiB.
static void w_host_fault(void* p, size_t n) {
	volatile char* b = p;
	for (size_t off = 0; off < n; off += 4096) b[off] = 0;
}

static void w_host_release(void* p, size_t n) { munmap(p, (n + DR_HUGE_PAGE - 1) & ~(DR_HUGE_PAGE - 1)); }

// w_host_register pins what w_host_reserve mapped, portable and
// device-mapped as cuMemHostAlloc's memory is.
static CUresult w_host_register(dr_api* a, CUcontext c, void* p, size_t n) {
	CUresult r = dr_ctx(a, c);
	if (r != DR_SUCCESS) return r;
	return a->cuMemHostRegister(p, (n + DR_HUGE_PAGE - 1) & ~(DR_HUGE_PAGE - 1), DR_MEMHOSTALLOC_PORTABLE | DR_MEMHOSTALLOC_DEVICEMAP);
}

static CUresult w_host_unmap(dr_api* a, CUcontext c, void* p, size_t n) {
	CUresult r = dr_ctx(a, c);
	if (r == DR_SUCCESS) r = a->cuMemHostUnregister(p);
	if (r == DR_SUCCESS) w_host_release(p, n);
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
// and they can be had (pinning is the kernel's work page by page: 32 MiB
// took 5.6 ms this way on the H100's host, 13 ms from cuMemHostAlloc),
// else from cuMemHostAlloc.
func (d *driver) hostAlloc(c C.CUcontext, n int64) (unsafe.Pointer, error) {
	if n >= hugePinMin && d.hugeUsable() {
		if p := hostReserve(n); p != nil {
			if d.hostRegister(c, p, n) == nil {
				return p, nil
			}
			hostRelease(p, n)
		}
		// Refused (a locked-memory limit, say): the driver's own
		// allocation may still succeed.
	}
	return d.memHostAlloc(c, n)
}

// hostReserve maps n bytes of huge pages for hostRegister (nil if the
// kernel refuses); hostRelease unmaps memory that was never registered.
func hostReserve(n int64) unsafe.Pointer { return C.w_host_reserve(C.size_t(n)) }

func hostRelease(p unsafe.Pointer, n int64) { C.w_host_release(p, C.size_t(n)) }

// hostFault makes the pages of n bytes from hostReserve, which read zero.
func hostFault(p unsafe.Pointer, n int64) { C.w_host_fault(p, C.size_t(n)) }

// hostRegister pins memory from hostReserve; hostFree then unpins and
// unmaps it.
func (d *driver) hostRegister(c C.CUcontext, p unsafe.Pointer, n int64) error {
	if err := d.check("cuMemHostRegister", C.w_host_register(d.api, c, p, C.size_t(n))); err != nil {
		return err
	}
	d.pins.mu.Lock()
	if d.pins.mapped == nil {
		d.pins.mapped = map[unsafe.Pointer]int64{}
	}
	d.pins.mapped[p] = n
	d.pins.mu.Unlock()
	return nil
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
