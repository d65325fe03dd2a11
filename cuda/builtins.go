package cuda

// builtinSource is the CUDA C twin of the CPU backend's builtin kernel
// library (see dag.Builtins). Conventions, shared with every backend:
//   - each buffer parameter arrives as (pointer, int64 element count), then
//     the scalars in declared order;
//   - element loops stride over the whole grid, so results never depend on
//     the launch shape;
//   - float arithmetic is rounded after every operation (__fmul_rn,
//     __fadd_rn: no fused multiply-add), in the order the CPU uses, so f32
//     results equal the CPU's bit for bit;
//   - reduce_sum accumulates in f64. Block 0 alone reduces (other blocks
//     return at once), so the result does not depend on the grid and is the
//     same run after run; its summation order differs from the CPU's
//     sequential one, so the f64 sums may differ in their last bits and the
//     f32 result by at most one unit in the last place (relative 2^-23).
//
// dagrun_fill64 is internal: a fill of 8-byte elements whose two halves
// differ, which cuMemsetD32 cannot express.
const builtinSource = `
typedef long long i64;

// Linear thread numbers over the whole launch shape (x, y and z), so that
// no two threads of any shape handle the same element.
__device__ __forceinline__ unsigned int dagrun_block_tid() {
	return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ unsigned int dagrun_block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
__device__ __forceinline__ i64 dagrun_tid() {
	i64 block = blockIdx.x + (i64)gridDim.x * (blockIdx.y + (i64)gridDim.y * blockIdx.z);
	return block * dagrun_block_threads() + dagrun_block_tid();
}
__device__ __forceinline__ i64 dagrun_nthreads() {
	return (i64)gridDim.x * gridDim.y * gridDim.z * dagrun_block_threads();
}

extern "C" __global__ void empty() {}

extern "C" __global__ void spin(double us) {
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	unsigned long long ns = (unsigned long long)(us * 1000.0);
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
}

extern "C" __global__ void iota(float* x, i64 n, float start) {
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = __fadd_rn(start, (float)i);
	}
}

extern "C" __global__ void scale(float* x, i64 n, float alpha) {
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = __fmul_rn(x[i], alpha);
	}
}

extern "C" __global__ void axpy(float* y, i64 ny, const float* x, i64 nx, float alpha) {
	i64 n = ny < nx ? ny : nx;
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
	}
}

extern "C" __global__ void add(float* c, i64 nc, const float* a, i64 na, const float* b, i64 nb) {
	i64 n = nc < na ? nc : na;
	n = n < nb ? n : nb;
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		c[i] = __fadd_rn(a[i], b[i]);
	}
}

extern "C" __global__ void reduce_sum(float* out, i64 nout, const float* in, i64 n) {
	__shared__ double part[1024];
	if (blockIdx.x != 0 || blockIdx.y != 0 || blockIdx.z != 0) {
		return;
	}
	unsigned int t = dagrun_block_tid(), nt = dagrun_block_threads();
	double s = 0.0;
	for (i64 i = t; i < n; i += nt) {
		s += (double)in[i];
	}
	part[t] = s;
	__syncthreads();
	// Tree reduction over the block; its size need not be a power of two.
	unsigned int width = 1;
	while (width < nt) {
		width <<= 1;
	}
	for (unsigned int half = width >> 1; half > 0; half >>= 1) {
		if (t < half && t + half < nt) {
			part[t] += part[t + half];
		}
		__syncthreads();
	}
	if (t == 0 && nout > 0) {
		out[0] = (float)part[0];
	}
}

extern "C" __global__ void matmul(float* c, i64 nc, const float* a, i64 na, const float* b, i64 nb, int m, int n, int k) {
	i64 total = (i64)m * n;
	for (i64 e = dagrun_tid(); e < total; e += dagrun_nthreads()) {
		i64 i = e / n, j = e % n;
		float acc = 0.0f;
		for (int p = 0; p < k; p++) {
			acc = __fadd_rn(acc, __fmul_rn(a[i * k + p], b[(i64)p * n + j]));
		}
		c[e] = acc;
	}
}

extern "C" __global__ void dagrun_fill64(unsigned long long* x, i64 n, unsigned long long v) {
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = v;
	}
}
`

// fill64Kernel is the entry of builtinSource that fills 8-byte elements.
const fill64Kernel = "dagrun_fill64"
