package cuda

/*
#include "cuda.h"

static CUresult w_pool_attr(dr_api* a, CUcontext c, CUmemoryPool pool, int attr, unsigned long long* v) {
	if (a->cuMemPoolGetAttribute == NULL) return DR_ERROR_NOT_FOUND;
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuMemPoolGetAttribute(pool, attr, v);
}
// w_pool_mark reads the bytes in use in the pool and resets its
// high-water mark: the start of a measured run.
static CUresult w_pool_mark(dr_api* a, CUcontext c, CUmemoryPool pool, unsigned long long* used) {
	CUresult r = w_pool_attr(a, c, pool, DR_MEMPOOL_ATTR_USED_MEM_CURRENT, used);
	if (r != 0) return r;
	unsigned long long zero = 0;
	return a->cuMemPoolSetAttribute(pool, DR_MEMPOOL_ATTR_USED_MEM_HIGH, &zero);
}
static CUresult w_graph_mem_attr(dr_api* a, CUcontext c, CUdevice d, int attr, unsigned long long* v) {
	if (a->cuDeviceGetGraphMemAttribute == NULL) return DR_ERROR_NOT_FOUND;
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	return a->cuDeviceGetGraphMemAttribute(d, attr, v);
}
static CUresult w_graph_mem_reset(dr_api* a, CUcontext c, CUdevice d) {
	if (a->cuDeviceSetGraphMemAttribute == NULL) return DR_ERROR_NOT_FOUND;
	CUresult r = dr_ctx(a, c);
	if (r != 0) return r;
	unsigned long long zero = 0;
	r = a->cuDeviceSetGraphMemAttribute(d, DR_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero);
	if (r != 0) return r;
	return a->cuDeviceSetGraphMemAttribute(d, DR_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero);
}
*/
import "C"

// The pool's measure of the temporaries. In pool mode a session's device
// temporaries come from the device's default memory pool (poolSetup; what
// cuMemAllocAsync draws on unless something in the process made another
// pool the device's current one). The pool counts the bytes it has handed
// out and not had back (USED_MEM_CURRENT) and their high-water mark
// (USED_MEM_HIGH), which setting 0 resets. A run's first allocation from
// the pool on a device notes the bytes in use and resets the mark; Sync
// reads the mark. The run's peak is the mark less the bytes in use before
// it, and the session's measure the most of its runs. The pool counts an
// allocation, rounded up as it rounds them, from the call that makes it to
// the call that frees it, which an eager run makes in the order of the
// plan's steps: the measure is the most bytes the steps allocate and have
// not yet freed (TestPoolHighWaterGPU checks it), which may exceed the
// planned peak, since an Alloc may come before the Free of a temporary
// whose uses are all done.
//
// The default pool is the process's, shared with every session on the
// device and any other user of it: what they hold when the run starts is
// left out, what they allocate or free while it runs is not, and a session
// running at the same time on the same device resets the mark too. The
// measure is exact only while the session is the pool's only user.
// Captured graphs' temporaries are memory nodes, which the graph allocator
// serves instead of the pool: replays (and the eager graphs of loops and
// branches) are not measured.

// mark is what a session measured of one device's pool.
type poolMark struct {
	watching bool   // a run has allocated from the pool since the last Sync
	base     uint64 // the pool's bytes in use before that run's first allocation
	peak     int64  // the most any finished run held at once
	measured bool   // a run was measured
	failed   bool   // the driver cannot tell (no cuMemPoolGetAttribute), or a read failed
}

// attr reads attribute attr (a DR_MEMPOOL_ATTR_) of pool.
func (d poolCalls) attr(c C.CUcontext, pool C.CUmemoryPool, attr C.int) (uint64, error) {
	var v C.ulonglong
	err := d.check("cuMemPoolGetAttribute", C.w_pool_attr(d.api, c, pool, attr, &v))
	return uint64(v), err
}

// mark returns the bytes in use in pool and resets its high-water
// mark.
func (d poolCalls) mark(c C.CUcontext, pool C.CUmemoryPool) (uint64, error) {
	var v C.ulonglong
	err := d.check("cuMemPoolGetAttribute/cuMemPoolSetAttribute", C.w_pool_mark(d.api, c, pool, &v))
	return uint64(v), err
}

// allocFigures are what a device's two stream-ordered allocators report:
// the pool's bytes in use and reserved, and the graph allocator's bytes in
// use and their high-water mark. The backend measures only the pool's
// bytes in use (see above); tests log the rest beside it.
type allocFigures struct {
	poolUsed, poolReserved uint64
	graphUsed, graphHigh   uint64
}

// allocFigures reads device ordinal's figures, as far as the driver tells.
func (hd *holdings) allocFigures(ordinal int) (allocFigures, error) {
	var f allocFigures
	d, err := hd.device(ordinal)
	if err != nil {
		return f, err
	}
	var v C.ulonglong
	get := func(dst *uint64, call string, r C.CUresult) {
		if e := hd.drv.check(call, r); e != nil && err == nil {
			err = e
		}
		*dst, v = uint64(v), 0
	}
	api, ctx := hd.drv.api, d.ctx
	get(&f.poolUsed, "cuMemPoolGetAttribute", C.w_pool_attr(api, ctx, d.pool, C.DR_MEMPOOL_ATTR_USED_MEM_CURRENT, &v))
	get(&f.poolReserved, "cuMemPoolGetAttribute", C.w_pool_attr(api, ctx, d.pool, C.DR_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v))
	get(&f.graphUsed, "cuDeviceGetGraphMemAttribute", C.w_graph_mem_attr(api, ctx, d.info.dev, C.DR_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v))
	get(&f.graphHigh, "cuDeviceGetGraphMemAttribute", C.w_graph_mem_attr(api, ctx, d.info.dev, C.DR_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v))
	return f, err
}

// resetGraphHigh resets the high-water marks of device ordinal's graph
// allocator.
func (hd *holdings) resetGraphHigh(ordinal int) error {
	d, err := hd.device(ordinal)
	if err != nil {
		return err
	}
	return hd.drv.check("cuDeviceSetGraphMemAttribute", C.w_graph_mem_reset(hd.drv.api, d.ctx, d.info.dev))
}

// watchPool starts measuring device d's pool for the run in progress, if
// it has not yet: call it before each allocation from the pool (not while
// capturing, whose allocations are the graph's).
func (hd *holdings) watchPool(d *sessDevice) {
	m := &d.mark
	if m.watching || m.failed {
		return
	}
	used, err := hd.drv.pools.mark(d.ctx, d.pool)
	if err != nil {
		m.failed = true
		return
	}
	m.base, m.watching = used, true
}

// endPoolRuns ends the measure of the run that Sync waited for, on every
// device it allocated from: every allocation and free of the run has been
// made by then and, unless the wait was abandoned, has run on its stream,
// so the mark holds the run whichever of the two the pool counts by.
func (hd *holdings) endPoolRuns() {
	for _, d := range hd.devs {
		m := &d.mark
		if !m.watching {
			continue
		}
		m.watching = false
		high, err := hd.drv.pools.attr(d.ctx, d.pool, C.DR_MEMPOOL_ATTR_USED_MEM_HIGH)
		if err != nil {
			m.failed = true
			continue
		}
		// A reset mark that nothing raised since may read 0, below base.
		m.peak = max(m.peak, int64(high)-int64(m.base), 0)
		m.measured = true
	}
}

// poolHighWater is MemoryHighWater without arenas: the most bytes the
// session's runs held at once in each device's pool, by ordinal, for the
// devices where a run was measured; nil where none was.
func (hd *holdings) poolHighWater() map[int]int64 {
	var out map[int]int64
	for ord, d := range hd.devs {
		if m := &d.mark; m.measured && !m.failed {
			if out == nil {
				out = map[int]int64{}
			}
			out[ord] = m.peak
		}
	}
	return out
}

// poolDeclared lists the values cuda.h declares by hand for the pool and
// the graph allocator, for TestNCCLHeader to compare with the real cuda.h.
func poolDeclared() map[string]int {
	return map[string]int{
		"sizeof(cuuint64_t)":                         int(C.sizeof_ulonglong),
		"CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED": C.DR_ATTR_MEMORY_POOLS_SUPPORTED,
		"CU_MEMPOOL_ATTR_RELEASE_THRESHOLD":          C.DR_MEMPOOL_ATTR_RELEASE_THRESHOLD,
		"CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT":       C.DR_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
		"CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH":          C.DR_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
		"CU_MEMPOOL_ATTR_USED_MEM_CURRENT":           C.DR_MEMPOOL_ATTR_USED_MEM_CURRENT,
		"CU_MEMPOOL_ATTR_USED_MEM_HIGH":              C.DR_MEMPOOL_ATTR_USED_MEM_HIGH,
		"CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT":         C.DR_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
		"CU_GRAPH_MEM_ATTR_USED_MEM_HIGH":            C.DR_GRAPH_MEM_ATTR_USED_MEM_HIGH,
		"CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT":     C.DR_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
		"CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH":        C.DR_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
	}
}
