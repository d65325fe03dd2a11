package cuda

import "strings"

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
// differ, which cuMemsetD32 cannot express. dagrun_init_random is internal
// too: a buffer's random initial contents, made on the device (initdev.go).
const builtinBase = `
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

// Programmatic dependent launch (compute capability 9.0 and later): a
// kernel launched early (programmatic stream serialization; pdl.go) may
// start while the kernel before it on its stream still runs. Every kernel
// here calls dagrun_pdl first, before it touches memory: griddepcontrol.wait
// blocks until the kernel it depends on has completed and its writes are
// visible (CUDA programming guide, Programmatic Dependent Launch:
// cudaGridDependencySynchronize waits for the primary grids to complete and
// flush their results to global memory), so the kernel is correct however
// it is launched; launched plainly, the wait returns at once. Then
// griddepcontrol.launch_dependents lets the next kernel launch: only a
// hint, since that kernel's own wait still waits for this one to complete,
// so triggering at the start is safe, and waiting first keeps at most two
// grids resident.
__device__ __forceinline__ void dagrun_pdl() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Elementwise maps: y[i] = f(x[i]) or f(a[i], b[i]) for i < n, 16 bytes a
// load and a store where every buffer is 16-byte aligned (8 half elements
// a thread: twice as fast as one at a time on the H100, at the memory's
// speed), one element at a time elsewhere; the same f for every element,
// so the results never depend on the path.
__device__ __forceinline__ bool dagrun_aligned16(const void* p, const void* q, const void* r) {
	return (((unsigned long long)p | (unsigned long long)q | (unsigned long long)r) & 15) == 0;
}
template <typename E, typename F>
__device__ __forceinline__ void dagrun_map1(E* y, const E* x, i64 n, F f) {
	i64 done = 0;
	if (dagrun_aligned16(y, x, x)) {
		const int V = 16 / sizeof(E);
		i64 nv = n / V;
		for (i64 k = dagrun_tid(); k < nv; k += dagrun_nthreads()) {
			uint4 in = ((const uint4*)x)[k], out;
#pragma unroll
			for (int j = 0; j < V; j++) {
				((E*)&out)[j] = f(((const E*)&in)[j]);
			}
			((uint4*)y)[k] = out;
		}
		done = nv * V;
	}
	for (i64 i = done + dagrun_tid(); i < n; i += dagrun_nthreads()) {
		y[i] = f(x[i]);
	}
}
template <typename E, typename F>
__device__ __forceinline__ void dagrun_map2(E* y, const E* a, const E* b, i64 n, F f) {
	i64 done = 0;
	if (dagrun_aligned16(y, a, b)) {
		const int V = 16 / sizeof(E);
		i64 nv = n / V;
		for (i64 k = dagrun_tid(); k < nv; k += dagrun_nthreads()) {
			uint4 va = ((const uint4*)a)[k], vb = ((const uint4*)b)[k], out;
#pragma unroll
			for (int j = 0; j < V; j++) {
				((E*)&out)[j] = f(((const E*)&va)[j], ((const E*)&vb)[j]);
			}
			((uint4*)y)[k] = out;
		}
		done = nv * V;
	}
	for (i64 i = done + dagrun_tid(); i < n; i += dagrun_nthreads()) {
		y[i] = f(a[i], b[i]);
	}
}

extern "C" __global__ void empty() { dagrun_pdl(); }

extern "C" __global__ void spin(double us) {
	dagrun_pdl();
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	unsigned long long ns = (unsigned long long)(us * 1000.0);
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
}

extern "C" __global__ void iota(float* x, i64 n, float start) {
	dagrun_pdl();
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = __fadd_rn(start, (float)i);
	}
}

extern "C" __global__ void scale(float* x, i64 n, float alpha) {
	dagrun_pdl();
	dagrun_map1(x, x, n, [=](float v) { return __fmul_rn(v, alpha); });
}

extern "C" __global__ void axpy(float* y, i64 ny, const float* x, i64 nx, float alpha) {
	dagrun_pdl();
	dagrun_map2(y, y, x, ny < nx ? ny : nx, [=](float v, float u) { return __fadd_rn(v, __fmul_rn(alpha, u)); });
}

extern "C" __global__ void add(float* c, i64 nc, const float* a, i64 na, const float* b, i64 nb) {
	dagrun_pdl();
	i64 n = nc < na ? nc : na;
	dagrun_map2(c, a, b, n < nb ? n : nb, [](float u, float v) { return __fadd_rn(u, v); });
}

extern "C" __global__ void reduce_sum(float* out, i64 nout, const float* in, i64 n) {
	dagrun_pdl();
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
	dagrun_pdl();
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

// set_flag sets the flag a conditional node reads: flag[0] = x[0] >
// threshold, compared in f64 (exact for an f32 x, as the CPU compares), a
// NaN comparing false. One thread writes it whatever the launch shape.
// Build refuses views that hold no whole element, so x holds one.
extern "C" __global__ void set_flag(int* flag, i64 nflag, const float* x, i64 nx, double threshold) {
	dagrun_pdl();
	if (dagrun_tid() == 0 && nx > 0) {
		flag[0] = ((double)x[0] > threshold) ? 1 : 0;
	}
}

extern "C" __global__ void set_flag_f64(int* flag, i64 nflag, const double* x, i64 nx, double threshold) {
	dagrun_pdl();
	if (dagrun_tid() == 0 && nx > 0) {
		flag[0] = (x[0] > threshold) ? 1 : 0;
	}
}

// Half-precision elements travel as their bits (unsigned short) and are
// worked on in f32: loads are exact, stores round to nearest even. f16
// converts with the PTX cvt instructions; bf16 with the same integer
// rounding as dag.BF16FromFloat32, which every architecture can run and
// which equals it bit for bit.
typedef unsigned short u16;
__device__ __forceinline__ float dr_ld_f16(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 dr_st_f16(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float dr_ld_bf16(u16 h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ u16 dr_st_bf16(float f) {
	unsigned int b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) {
		return (u16)((b >> 16) | 0x40u);
	}
	return (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float dr_ld_f32(float v) { return v; }
__device__ __forceinline__ float dr_st_f32(float v) { return v; }

// gelu of one element in f32, tanh form, in the CPU twin's order.
__device__ __forceinline__ float dagrun_gelu(float v) {
	float cube = __fmul_rn(__fmul_rn(v, v), v);
	float inner = __fmul_rn(0.7978845608028654f, __fadd_rn(v, __fmul_rn(0.044715f, cube)));
	return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
}

extern "C" __global__ void dagrun_fill64(unsigned long long* x, i64 n, unsigned long long v) {
	dagrun_pdl();
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = v;
	}
}

// The i-th draw (from 0) of SplitMix64 seeded with seed: its counter form,
// dag.splitmixAt, so that each element is made on its own.
__device__ __forceinline__ unsigned long long dr_splitmix_at(unsigned long long seed, unsigned long long i) {
	unsigned long long z = seed + (i + 1ull) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// The bits of k * 2^-frac (0 <= k < 2^frac <= 2^(mbits+1)) in the IEEE
// format of mbits mantissa bits and exponent bias bias. The value is exact
// and, when not zero, normal, so integer operations build it: no float
// rounding or flush-to-zero mode can enter. Mirrored by exactBits in
// initdev_test.go, which checks it against Go's conversions.
__device__ __forceinline__ unsigned long long dr_exact_bits(unsigned long long k, int frac, int mbits, int bias) {
	if (k == 0ull) {
		return 0ull;
	}
	int p = 63 - __clzll((long long)k); // k's top bit: the implicit one
	return ((unsigned long long)(p - frac + bias) << mbits) | ((k << (mbits - p)) & ((1ull << mbits) - 1ull));
}

// dagrun_init_random is internal: a buffer's random initial contents, n
// elements of dtype dt (dag.DType's numbering), element i made from draw i
// exactly as dag's writeRandom makes it: floats are k / 2^frac for the top
// frac bits k of the draw.
extern "C" __global__ void dagrun_init_random(void* x, i64 n, unsigned long long seed, int dt) {
	dagrun_pdl();
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		unsigned long long r = dr_splitmix_at(seed, (unsigned long long)i);
		switch (dt) {
		case 0: // u8: the low byte
			((unsigned char*)x)[i] = (unsigned char)r;
			break;
		case 1: // i32: r & 0xff
			((unsigned int*)x)[i] = (unsigned int)(r & 0xffull);
			break;
		case 2: // i64: r & 0xff
			((unsigned long long*)x)[i] = r & 0xffull;
			break;
		case 3: // f32: float32(r>>40) / 2^24
			((unsigned int*)x)[i] = (unsigned int)dr_exact_bits(r >> 40, 24, 23, 127);
			break;
		case 4: // f64: float64(r>>11) / 2^53
			((unsigned long long*)x)[i] = dr_exact_bits(r >> 11, 53, 52, 1023);
			break;
		case 5: // f16: (r>>53) / 2^11
			((u16*)x)[i] = (u16)dr_exact_bits(r >> 53, 11, 10, 15);
			break;
		case 6: // bf16: (r>>56) / 2^8
			((u16*)x)[i] = (u16)dr_exact_bits(r >> 56, 8, 7, 127);
			break;
		}
	}
}
`

// builtinSource is the library: the f32 kernels above, and the kernels
// with f16 and bf16 variants written out for each dtype (see halfTemplate
// and layerTemplate), so that every entry is declared in plain text.
var builtinSource = builtinBase + expand(halfTemplate, "f16", "_f16") + expand(halfTemplate, "bf16", "_bf16") +
	expand(layerTemplate, "f32", "") + expand(layerTemplate, "f16", "_f16") + expand(layerTemplate, "bf16", "_bf16")

// expand instantiates a kernel template for elements of dtype dt (f32,
// f16 or bf16): T is the element type, LD and ST its load and store as
// f32, T_ELEM the element type, and SUF the entry names' suffix.
func expand(tmpl, dt, suffix string) string {
	elem := "u16"
	if dt == "f32" {
		elem = "float"
	}
	return strings.NewReplacer("SUF", suffix, "T*", elem+"*", "T_ELEM", elem, "LD(", "dr_ld_"+dt+"(", "ST(", "dr_st_"+dt+"(").Replace(tmpl)
}

// halfTemplate holds the elementwise kernels of f16 and bf16 buffers whose
// f32 versions are in builtinBase.
const halfTemplate = `
extern "C" __global__ void iotaSUF(T* x, i64 n, float start) {
	dagrun_pdl();
	for (i64 i = dagrun_tid(); i < n; i += dagrun_nthreads()) {
		x[i] = ST(__fadd_rn(start, (float)i));
	}
}

extern "C" __global__ void scaleSUF(T* x, i64 n, float alpha) {
	dagrun_pdl();
	dagrun_map1(x, x, n, [=](T_ELEM v) { return ST(__fmul_rn(LD(v), alpha)); });
}

extern "C" __global__ void axpySUF(T* y, i64 ny, const T* x, i64 nx, float alpha) {
	dagrun_pdl();
	dagrun_map2(y, y, x, ny < nx ? ny : nx, [=](T_ELEM v, T_ELEM u) { return ST(__fadd_rn(LD(v), __fmul_rn(alpha, LD(u)))); });
}

extern "C" __global__ void addSUF(T* c, i64 nc, const T* a, i64 na, const T* b, i64 nb) {
	dagrun_pdl();
	i64 n = nc < na ? nc : na;
	dagrun_map2(c, a, b, n < nb ? n : nb, [](T_ELEM u, T_ELEM v) { return ST(__fadd_rn(LD(u), LD(v))); });
}
`

// layerTemplate holds the layer kernels. The order of operations is the
// CPU twin's; tanhf and expf are CUDA's (within 2 ulp of the exact value,
// where the CPU's are correctly rounded). softmax gives each row to one
// thread, in column order, so its sums never depend on the launch shape.
const layerTemplate = `
extern "C" __global__ void geluSUF(T* y, i64 ny, const T* x, i64 nx) {
	dagrun_pdl();
	dagrun_map1(y, x, ny < nx ? ny : nx, [](T_ELEM v) { return ST(dagrun_gelu(LD(v))); });
}

extern "C" __global__ void reluSUF(T* y, i64 ny, const T* x, i64 nx) {
	dagrun_pdl();
	dagrun_map1(y, x, ny < nx ? ny : nx, [](T_ELEM e) {
		float v = LD(e);
		return ST((v > 0.0f || v != v) ? v : 0.0f);
	});
}

// bias_add goes 16 bytes of y at a time where y is 16-byte aligned, the
// bias element by element (one modulo a vector, not one an element).
extern "C" __global__ void bias_addSUF(T* y, i64 ny, const T* b, i64 nb) {
	dagrun_pdl();
	if (nb <= 0) {
		return;
	}
	i64 done = 0;
	if (dagrun_aligned16(y, y, y)) {
		const int V = 16 / sizeof(*y);
		i64 nv = ny / V;
		for (i64 k = dagrun_tid(); k < nv; k += dagrun_nthreads()) {
			uint4 v = ((const uint4*)y)[k];
			i64 c = (k * V) % nb;
#pragma unroll
			for (int j = 0; j < V; j++) {
				((T_ELEM*)&v)[j] = ST(__fadd_rn(LD(((T_ELEM*)&v)[j]), LD(b[c])));
				c = c + 1 == nb ? 0 : c + 1;
			}
			((uint4*)y)[k] = v;
		}
		done = nv * V;
	}
	for (i64 i = done + dagrun_tid(); i < ny; i += dagrun_nthreads()) {
		y[i] = ST(__fadd_rn(LD(y[i]), LD(b[i % nb])));
	}
}

extern "C" __global__ void softmaxSUF(T* y, i64 ny, const T* x, i64 nx, int cols) {
	dagrun_pdl();
	i64 n = ny < nx ? ny : nx;
	if (cols <= 0) {
		return;
	}
	i64 rows = n / cols;
	for (i64 r = dagrun_tid(); r < rows; r += dagrun_nthreads()) {
		const T* xr = x + r * cols;
		T* yr = y + r * cols;
		float m = -__int_as_float(0x7f800000);
		for (int j = 0; j < cols; j++) {
			float v = LD(xr[j]);
			m = v > m ? v : m;
		}
		float s = 0.0f;
		for (int j = 0; j < cols; j++) {
			s = __fadd_rn(s, expf(__fsub_rn(LD(xr[j]), m)));
		}
		for (int j = 0; j < cols; j++) {
			yr[j] = ST(__fdiv_rn(expf(__fsub_rn(LD(xr[j]), m)), s));
		}
	}
}
`

// fill64Kernel is the entry of builtinSource that fills 8-byte elements.
const fill64Kernel = "dagrun_fill64"

// initRandomKernel is the entry of builtinSource that makes random initial
// contents.
const initRandomKernel = "dagrun_init_random"
