package cuda

/*
#include <stdlib.h>
#include "cublas.h"

static const char* w_lt_status_name(dr_lt* l, cublasStatus_t s) { return l->cublasLtGetStatusName(s); }
static const char* w_lt_status_string(dr_lt* l, cublasStatus_t s) { return l->cublasLtGetStatusString(s); }
static size_t w_lt_version(dr_lt* l) { return l->cublasLtGetVersion(); }
*/
import "C"

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// ErrNoCuBLASLt is reported (through errors.Is) when a graph has GEMMs
// but no usable cuBLASLt library can be loaded.
var ErrNoCuBLASLt = errors.New("no usable cuBLASLt library")

// CuBLASError is a failed cuBLASLt call.
type CuBLASError struct {
	Call   string // the entry point, for example "cublasLtMatmul"
	Status int    // the cublasStatus_t
	Name   string // its name, for example "CUBLAS_STATUS_NOT_SUPPORTED"
	Msg    string
}

func (e *CuBLASError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Status)
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Status, e.Msg)
}

// cuBLASLt major versions whose enum values and structures the binding in
// cublas.h matches (cuda/testdata/cublaslt_check.c checks them against
// the headers of the machine it runs on).
var cublasLtMajors = []int{12, 13}

// gemmMaxWorkspace bounds the workspace of one GEMM's algorithm: NVIDIA's
// recommendation for Hopper.
const gemmMaxWorkspace = 32 << 20

// cublasLtCandidates lists where libcublasLt is looked for, in order:
// DAGRUN_CUBLASLT (a library file, or a folder holding one), the dynamic
// loader's search, the CUDA toolkit, and NVIDIA's pip packages.
func cublasLtCandidates(env string) []string {
	return libraryCandidates(env, []string{"libcublasLt.so.13", "libcublasLt.so.12"}, cudaLib,
		torchWheel+"cu13/lib", torchWheel+"cublas/lib", distWheel+"cu13/lib", distWheel+"cublas/lib")
}

// cublasLt is a loaded cuBLASLt library.
type cublasLt struct {
	lib     *C.dr_lt
	path    string
	version int // cublasLtGetVersion: major*10000 + minor*100 + patch
}

func openCuBLASLt(candidates []string) (*cublasLt, error) {
	lib := (*C.dr_lt)(C.calloc(1, C.sizeof_dr_lt))
	if lib == nil {
		return nil, fmt.Errorf("%w: out of memory", ErrNoCuBLASLt)
	}
	p, msg := loadFirst(candidates, func(path string, why **C.char) C.int {
		return withCString(path, func(cp *C.char) C.int { return C.dr_lt_load(lib, cp, why) })
	})
	if p != "" {
		l := &cublasLt{lib: lib, path: p, version: int(C.w_lt_version(lib))}
		if err := checkCuBLASLtVersion(l.version, p); err != nil {
			l.close()
			return nil, err
		}
		return l, nil
	}
	C.free(unsafe.Pointer(lib))
	return nil, fmt.Errorf("%w: libcublasLt.so.13: %s (install the CUDA toolkit or the nvidia-cublas pip package, or set DAGRUN_CUBLASLT to libcublasLt's path; the cpu backend runs GEMMs without it)",
		ErrNoCuBLASLt, msg)
}

// checkCuBLASLtVersion refuses a cuBLASLt whose major version the binding
// was not checked against: its enum values or structures may differ.
func checkCuBLASLtVersion(v int, path string) error {
	major, minor, patch := v/10000, v/100%100, v%100
	if v < 100000 { // cuBLAS 11 and older count major*1000 + minor*100 + patch
		major, minor = v/1000, v/100%10
	}
	for _, m := range cublasLtMajors {
		if major == m {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is cuBLASLt %d.%d.%d, but dagrun's binding is checked against major versions %v only (point DAGRUN_CUBLASLT at a cuBLASLt 13 library)",
		ErrNoCuBLASLt, path, major, minor, patch, cublasLtMajors)
}

func (l *cublasLt) close() {
	if l.lib != nil {
		C.dr_lt_unload(l.lib)
		C.free(unsafe.Pointer(l.lib))
		l.lib = nil
	}
}

func (l *cublasLt) err(call string, st C.cublasStatus_t) error {
	e := &CuBLASError{Call: call, Status: int(st)}
	if s := C.w_lt_status_name(l.lib, st); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.w_lt_status_string(l.lib, st); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// gemmType is how cuBLASLt is told about a GEMM of dtype dt: the data
// type of the matrices, the compute type and the type of alpha and beta.
type gemmType struct {
	data, compute, scale C.int
	f64                  bool
}

func gemmTypeOf(dt dag.DType, tf32 bool) (gemmType, error) {
	switch dt {
	case dag.F32:
		t := gemmType{data: C.DR_CUDA_R_32F, compute: C.DR_CUBLAS_COMPUTE_32F, scale: C.DR_CUDA_R_32F}
		if tf32 {
			t.compute = C.DR_CUBLAS_COMPUTE_32F_FAST_TF32
		}
		return t, nil
	case dag.F64:
		return gemmType{data: C.DR_CUDA_R_64F, compute: C.DR_CUBLAS_COMPUTE_64F, scale: C.DR_CUDA_R_64F, f64: true}, nil
	case dag.F16:
		return gemmType{data: C.DR_CUDA_R_16F, compute: C.DR_CUBLAS_COMPUTE_32F, scale: C.DR_CUDA_R_32F}, nil
	case dag.BF16:
		return gemmType{data: C.DR_CUDA_R_16BF, compute: C.DR_CUBLAS_COMPUTE_32F, scale: C.DR_CUDA_R_32F}, nil
	}
	return gemmType{}, fmt.Errorf("cuBLASLt GEMMs take f32, f64, f16 or bf16 matrices, not %s", dt)
}

// gemmKey is a GEMM's signature: what the heuristic sees. GEMMs of one
// signature on one device share the algorithm picked for the first.
type gemmKey struct {
	device      int
	dt          dag.DType
	tf32        bool
	transA      bool
	transB      bool
	m, n, k     int64
	lda, ldb    int64
	ldc         int64
	batch       int64
	sa, sb, sc  int64
	align       [4]uint32 // A, B, C, D
	betaNonZero bool
	epilogue    dag.Epilogue
	smTarget    int // SM_COUNT_TARGET: 0, or the SMs a GEMM that leaves some tunes for
}

type ltHandle struct {
	h   C.cublasLtHandle_t
	ctx C.CUcontext
}

type gemmAlgo struct {
	algo C.dr_lt_algo
	ws   C.size_t
}

// gemmer runs a session's GEMM ops with cuBLASLt: per GEMM spec its
// descriptors, its algorithm (the one of its signature, which the
// Backend's sessions share: ltShared) and a workspace of its own (so GEMMs
// on different streams never share one). close releases what an Open made.
type gemmer struct {
	drv        *driver
	shared     *ltShared        // the library, handles and algorithms of the Backend
	lt         *cublasLt        // shared's library, once the first GEMM is prepared
	handles    map[int]ltHandle // the shared handles this session's GEMMs use, by device ordinal
	recs       map[*dag.GemmSpec]*gemmRec
	workspaces int // device allocations held
	// borrow, when set, lends the workspace of the k-th GEMM prepared
	// (a session over another's memory: shared.go); borrowed counts them.
	borrow   func(k int, d *gpu, n int64) (C.CUdeviceptr, error)
	borrowed int
}

// gemmRec is one prepared GEMM, in C memory (cuBLASLt reads alpha and
// beta through pointers into it).
type gemmRec struct {
	c     *C.dr_gemm
	dev   *gpu
	align [4]uint32 // the alignments the algorithm was picked for
	name  string    // the op's, for Unfused
	lent  bool      // its workspace is lent (borrow): not freed here

	epilogue dag.Epilogue // the op's
	// unfused says why the product runs without its epilogue, which the
	// builtin kernels in launches then apply ("" when cuBLASLt applies it).
	unfused  string
	launches []epiLaunch // epilogue.go
}

func newGemmer(drv *driver, shared *ltShared) *gemmer {
	return &gemmer{drv: drv, shared: shared, handles: map[int]ltHandle{}, recs: map[*dag.GemmSpec]*gemmRec{}}
}

// viewAlign is the alignment, in bytes up to 256, of view v of a device
// buffer: the driver aligns a persistent buffer's base to 256 bytes at
// least; a temporary one, allocated from a pool at run time, is counted
// on for 16 only (what cuBLASLt's vectorised kernels need), and Run checks
// the addresses it gets.
func viewAlign(v dag.View) uint32 {
	base := uint64(256)
	if v.Buf != nil && v.Buf.Temporary {
		base = 16
	}
	if v.Offset == 0 {
		return uint32(base)
	}
	return uint32(min(1<<bits.TrailingZeros64(uint64(v.Offset)), base))
}

// prepare makes op's GEMM ready on device d: its handle, scale factors,
// descriptors, algorithm and workspace (setup), or finds them made for its
// spec already. Where cuBLASLt refuses op's epilogue (refusedEpilogue) or
// dagrun does not hand it the bias (epilogueRefusal), the product is
// prepared without it and the rec says why (unfused): the session then
// applies it with the builtin kernels (cublas_backend.go). Any other
// failure is the op's: the unfused product would fail the same way.
func (g *gemmer) prepare(d *gpu, op *dag.Op) (*gemmRec, error) {
	if err := dag.CheckGemmViews(op); err != nil {
		return nil, err
	}
	s := op.Gemm
	var align [4]uint32
	for i := range align {
		align[i] = viewAlign(op.Access[min(i, len(op.Access)-1)].View)
		if i == dag.GemmD && !s.SeparateD {
			align[i] = align[dag.GemmC]
		}
	}
	if r := g.recs[s]; r != nil {
		// A variant of a prepared op (rebound views): the same GEMM, whose
		// new addresses Run checks against the alignments picked for.
		if r.dev != d {
			return nil, fmt.Errorf("gemm prepared for device %d runs on device %d", r.dev.ordinal, d.ordinal)
		}
		return r, nil
	}
	dt := op.Access[dag.GemmA].Buf.DType
	typ, err := gemmTypeOf(dt, s.TF32)
	if err != nil {
		return nil, err
	}
	if g.lt == nil {
		lt, err := g.shared.library()
		if err != nil {
			return nil, err
		}
		g.lt = lt
	}
	if _, ok := g.handles[d.ordinal]; !ok {
		h, err := g.shared.handle(d)
		if err != nil {
			return nil, err
		}
		g.handles[d.ordinal] = h
	}
	rec := (*C.dr_gemm)(C.calloc(1, C.sizeof_dr_gemm))
	if rec == nil {
		return nil, errors.New("out of host memory")
	}
	r := &gemmRec{c: rec, dev: d, align: align, name: op.Name, epilogue: s.Epilogue}
	fail := func(err error) (*gemmRec, error) {
		C.dr_gemm_teardown(g.lt.lib, rec)
		C.free(unsafe.Pointer(rec))
		return nil, err
	}
	shape := colMajorShape(s, typ, align)
	key := gemmKey{device: d.ordinal, dt: dt, tf32: s.TF32, transA: s.TransA, transB: s.TransB, m: s.M, n: s.N, k: s.K,
		lda: s.LDA, ldb: s.LDB, ldc: s.LDC, batch: s.Batch, sa: s.StrideA, sb: s.StrideB, sc: s.StrideC,
		align: align, betaNonZero: s.Beta != 0}
	if s.LeaveSMs > 0 {
		target, err := g.smTarget(d.ordinal, s.LeaveSMs)
		if err != nil {
			return fail(err)
		}
		shape.smCountTarget, key.smTarget = C.int32_t(target), target
	}
	if s.Epilogue != dag.NoEpilogue {
		why := epilogueRefusal(op) // epilogue.go
		if why == "" {
			shape.epilogue, shape.bias = ltEpilogue(s.Epilogue), biasProbe // epilogue.go
			key.epilogue = s.Epilogue
			err := g.setup(r, &shape, key, op)
			if err == nil {
				g.recs[s] = r
				return r, nil
			}
			if !refusedEpilogue(err) {
				return fail(fmt.Errorf("with epilogue %s: %w", s.Epilogue, err))
			}
			why = err.Error()
			C.dr_gemm_teardown(g.lt.lib, rec)
		}
		r.unfused = why
		shape.epilogue, shape.bias = C.DR_LT_EPILOGUE_DEFAULT, 0
		key.epilogue = dag.NoEpilogue
	}
	if err := g.setup(r, &shape, key, op); err != nil {
		return fail(err)
	}
	g.recs[s] = r
	return r, nil
}

// smTarget is the SMs a GEMM on device ordinal that leaves leave SMs to
// the work beside it tunes for: the device's less those, at least one.
func (g *gemmer) smTarget(ordinal, leave int) (int, error) {
	info, err := g.drv.device(ordinal)
	if err != nil {
		return 0, err
	}
	n, err := g.drv.smCount(info)
	if err != nil {
		return 0, err
	}
	return max(n-leave, 1), nil
}

// errCUDA marks setup's failures of the driver, not of cuBLASLt: no
// fallback helps with those.
var errCUDA = errors.New("CUDA driver")

// errNoAlgorithm is setup's error where the heuristic found no algorithm.
var errNoAlgorithm = errors.New("cuBLASLt has no algorithm")

// refusedEpilogue reports whether err, setup's for a GEMM with an
// epilogue, is cuBLASLt refusing the epilogue for the GEMM's shape and
// types: no algorithm, or no heuristic (CUBLAS_STATUS_NOT_SUPPORTED). Only
// then does the product run without it; a failure of the driver, of the
// handle or of the binding would fail the product alike, and is reported
// as it is rather than hidden behind a fallback.
func refusedEpilogue(err error) bool {
	if errors.Is(err, errNoAlgorithm) {
		return true
	}
	var ce *CuBLASError
	return errors.As(err, &ce) && ce.Status == C.DR_CUBLAS_STATUS_NOT_SUPPORTED
}

// setup makes r ready on its device's handle: its scale factors, its
// descriptors for shape, its algorithm (the one of its signature, key, if
// known) and workspace.
func (g *gemmer) setup(r *gemmRec, shape *C.dr_gemm_shape, key gemmKey, op *dag.Op) error {
	rec, d := r.c, r.dev
	h, ok := g.handles[d.ordinal]
	if !ok || h.h == nil || h.ctx != d.ctx {
		return fmt.Errorf("no cublasLtCreate handle for the context of device %d", d.ordinal)
	}
	known, haveAlgo := g.shared.algo(key)
	var step *C.char
	var cu C.CUresult
	pick := C.int(1)
	if haveAlgo {
		pick = 0
	}
	st := C.dr_gemm_setup(g.lt.lib, g.drv.api, d.ctx, h.h, rec, shape, pick, &step, &cu)
	if err := g.drv.check("cuCtxSetCurrent", cu); err != nil {
		return fmt.Errorf("%w: %w", errCUDA, err)
	}
	switch {
	case st == -1:
		return fmt.Errorf("%w for the %s gemm %s on device %d (%s)", errNoAlgorithm, key.dt, op.Gemm, d.ordinal, d.info.name)
	case st != 0:
		return g.lt.err(C.GoString(step), st)
	}
	if haveAlgo {
		rec.algo, rec.workspaceSize = known.algo, known.ws
	} else {
		g.shared.keep(key, gemmAlgo{algo: rec.algo, ws: rec.workspaceSize})
	}
	switch {
	case rec.workspaceSize > 0 && g.borrow != nil:
		p, err := g.borrow(g.borrowed, d, int64(rec.workspaceSize))
		if err != nil {
			return fmt.Errorf("%w: workspace of %d bytes for cuBLASLt: %w", errCUDA, rec.workspaceSize, err)
		}
		rec.workspace, r.lent = p, true
		g.borrowed++
	case rec.workspaceSize > 0:
		p, err := g.drv.memAlloc(d.ctx, int64(rec.workspaceSize))
		if err != nil {
			return fmt.Errorf("%w: workspace of %d bytes for cuBLASLt: %w", errCUDA, rec.workspaceSize, err)
		}
		rec.workspace = p
		g.workspaces++
	}
	return nil
}

// colMajorShape maps row-major D = op(A) op(B) (m x n) onto cuBLASLt's
// column-major terms: a row-major R x C matrix is a column-major C x R
// one, so D^T = op(B)^T op(A)^T is computed with x = B and y = A, each
// keeping its transpose flag, and D^T is n x m.
func colMajorShape(s *dag.GemmSpec, t gemmType, align [4]uint32) C.dr_gemm_shape {
	la, lb, lc := s.LayoutA(), s.LayoutB(), s.LayoutC()
	op := func(trans bool) C.int {
		if trans {
			return C.DR_CUBLAS_OP_T
		}
		return C.DR_CUBLAS_OP_N
	}
	return C.dr_gemm_shape{
		computeType: t.compute, scaleType: t.scale, dataType: t.data,
		transx: op(s.TransB), transy: op(s.TransA),
		m: C.uint64_t(s.N), n: C.uint64_t(s.M), k: C.uint64_t(s.K),
		xrows: C.uint64_t(lb.Cols), xcols: C.uint64_t(lb.Rows),
		yrows: C.uint64_t(la.Cols), ycols: C.uint64_t(la.Rows),
		ldx: C.int64_t(lb.LD), ldy: C.int64_t(la.LD), ldc: C.int64_t(lc.LD),
		batch:   C.int32_t(s.Batch),
		stridex: C.int64_t(lb.Stride), stridey: C.int64_t(la.Stride), stridec: C.int64_t(lc.Stride),
		alignx: C.uint32_t(align[dag.GemmB]), aligny: C.uint32_t(align[dag.GemmA]),
		alignc: C.uint32_t(align[dag.GemmC]), alignd: C.uint32_t(align[dag.GemmD]),
		maxWorkspace: gemmMaxWorkspace,
		epilogue:     C.DR_LT_EPILOGUE_DEFAULT,
		alpha:        C.double(s.Alpha), beta: C.double(s.Beta),
	}
}

// statusErr is the error of a cuBLASLt call that returned st, for
// callers without cuBLASLt's types (a GEMM step of a stretch).
func (g *gemmer) statusErr(call string, st int) error { return g.lt.err(call, C.cublasStatus_t(st)) }

// run enqueues r on stream s with the operands' device addresses now,
// which gemmHooks.operands checked (bias: of a bias epilogue, else 0).
func (g *gemmer) run(r *gemmRec, s C.CUstream, a, b, c, d, bias C.CUdeviceptr) error {
	var cu C.CUresult
	st := C.dr_gemm_run(g.lt.lib, g.drv.api, r.dev.ctx, r.c, b, a, c, d, bias, s, &cu)
	if err := g.drv.check("cuCtxSetCurrent", cu); err != nil {
		return err
	}
	if st != 0 {
		return g.lt.err("cublasLtMatmul", st)
	}
	return nil
}

// close releases every descriptor and workspace; the devices must be
// idle. The library and the handles are the Backend's (ltShared).
func (g *gemmer) close() error {
	var errs []error
	for s, r := range g.recs {
		if r.c.workspace != 0 && !r.lent {
			if err := g.drv.memFree(r.dev.ctx, r.c.workspace); err != nil {
				errs = append(errs, err)
			}
			g.workspaces--
		}
		C.dr_gemm_teardown(g.lt.lib, r.c)
		C.free(unsafe.Pointer(r.c))
		r.freeLaunches() // epilogue.go
		delete(g.recs, s)
	}
	clear(g.handles)
	return errors.Join(errs...)
}

// descAttrs reads back from cuBLASLt the attributes of r's matmul
// descriptor that setup sets, by name: the bytes cuBLASLt holds, as many
// as it keeps each in. The GPU tests compare them with what the binding
// means to set: a wrong attribute value or size shows there as a wrong
// value or length, where the header check sees only the declarations.
func (g *gemmer) descAttrs(r *gemmRec) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, a := range []struct {
		name string
		attr C.int
	}{{"TRANSA", C.DR_LT_MATMUL_DESC_TRANSA}, {"TRANSB", C.DR_LT_MATMUL_DESC_TRANSB},
		{"EPILOGUE", C.DR_LT_MATMUL_DESC_EPILOGUE}, {"BIAS_POINTER", C.DR_LT_MATMUL_DESC_BIAS_POINTER}} {
		var n C.size_t
		if st := C.dr_gemm_desc_get(g.lt.lib, r.c, a.attr, nil, 0, &n); st != 0 {
			return nil, g.lt.err("cublasLtMatmulDescGetAttribute("+a.name+")", st)
		}
		buf := make([]byte, max(int(n), 1))
		if st := C.dr_gemm_desc_get(g.lt.lib, r.c, a.attr, unsafe.Pointer(&buf[0]), n, &n); st != 0 {
			return nil, g.lt.err("cublasLtMatmulDescGetAttribute("+a.name+")", st)
		}
		out[a.name] = buf[:n]
	}
	return out, nil
}

// bindingValue is one value the binding in cublas.h declares by hand, with
// the C expression that gives it in the real cuBLASLt headers.
type bindingValue struct {
	Expr  string
	Value int64
}

// cublasBinding lists every hand-declared enum value, structure size and
// field offset the binding relies on, for cuda/testdata/cublaslt_check.c.
func cublasBinding() []bindingValue {
	var h C.dr_lt_heuristic
	return []bindingValue{
		{"CUBLAS_STATUS_SUCCESS", C.DR_CUBLAS_STATUS_SUCCESS},
		{"CUBLAS_STATUS_NOT_INITIALIZED", C.DR_CUBLAS_STATUS_NOT_INITIALIZED},
		{"CUBLAS_STATUS_NOT_SUPPORTED", C.DR_CUBLAS_STATUS_NOT_SUPPORTED},
		{"CUBLAS_OP_N", C.DR_CUBLAS_OP_N},
		{"CUBLAS_OP_T", C.DR_CUBLAS_OP_T},
		{"CUBLAS_COMPUTE_32F", C.DR_CUBLAS_COMPUTE_32F},
		{"CUBLAS_COMPUTE_32F_FAST_TF32", C.DR_CUBLAS_COMPUTE_32F_FAST_TF32},
		{"CUBLAS_COMPUTE_64F", C.DR_CUBLAS_COMPUTE_64F},
		{"CUDA_R_32F", C.DR_CUDA_R_32F},
		{"CUDA_R_64F", C.DR_CUDA_R_64F},
		{"CUDA_R_16F", C.DR_CUDA_R_16F},
		{"CUDA_R_16BF", C.DR_CUDA_R_16BF},
		{"CUBLASLT_MATMUL_DESC_TRANSA", C.DR_LT_MATMUL_DESC_TRANSA},
		{"CUBLASLT_MATMUL_DESC_TRANSB", C.DR_LT_MATMUL_DESC_TRANSB},
		{"CUBLASLT_MATMUL_DESC_EPILOGUE", C.DR_LT_MATMUL_DESC_EPILOGUE},
		{"CUBLASLT_MATMUL_DESC_BIAS_POINTER", C.DR_LT_MATMUL_DESC_BIAS_POINTER},
		{"CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET", C.DR_LT_MATMUL_DESC_SM_COUNT_TARGET},
		{"CUBLASLT_EPILOGUE_DEFAULT", C.DR_LT_EPILOGUE_DEFAULT},
		{"CUBLASLT_EPILOGUE_RELU", C.DR_LT_EPILOGUE_RELU},
		{"CUBLASLT_EPILOGUE_BIAS", C.DR_LT_EPILOGUE_BIAS},
		{"CUBLASLT_EPILOGUE_RELU_BIAS", C.DR_LT_EPILOGUE_RELU_BIAS},
		{"CUBLASLT_EPILOGUE_GELU", C.DR_LT_EPILOGUE_GELU},
		{"CUBLASLT_EPILOGUE_GELU_BIAS", C.DR_LT_EPILOGUE_GELU_BIAS},
		{"CUBLASLT_MATRIX_LAYOUT_ORDER", C.DR_LT_MATRIX_LAYOUT_ORDER},
		{"CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT", C.DR_LT_MATRIX_LAYOUT_BATCH_COUNT},
		{"CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET", C.DR_LT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET},
		{"CUBLASLT_ORDER_COL", C.DR_LT_ORDER_COL},
		{"CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES", C.DR_LT_MATMUL_PREF_MAX_WORKSPACE_BYTES},
		{"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", C.DR_LT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES},
		{"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES", C.DR_LT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES},
		{"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", C.DR_LT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES},
		{"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES", C.DR_LT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES},
		{"sizeof(cublasLtMatmulAlgo_t)", C.sizeof_dr_lt_algo},
		{"sizeof(cublasLtMatmulHeuristicResult_t)", C.sizeof_dr_lt_heuristic},
		{"offsetof(cublasLtMatmulHeuristicResult_t, algo)", int64(unsafe.Offsetof(h.algo))},
		{"offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize)", int64(unsafe.Offsetof(h.workspaceSize))},
		{"offsetof(cublasLtMatmulHeuristicResult_t, state)", int64(unsafe.Offsetof(h.state))},
		{"offsetof(cublasLtMatmulHeuristicResult_t, wavesCount)", int64(unsafe.Offsetof(h.wavesCount))},
		{"sizeof(cublasStatus_t)", C.sizeof_cublasStatus_t},
		// The attributes the binding sets, by the size of what it passes.
		{"sizeof(cublasOperation_t)", 4},
		{"sizeof(cublasLtOrder_t)", 4},
		{"sizeof(cudaDataType)", 4},
		{"sizeof(cublasComputeType_t)", 4},
		{"sizeof(cublasLtEpilogue_t)", 4},
		{"sizeof(uint32_t)", 4},                       // EPILOGUE's value, as cublasLt.h documents it
		{"sizeof(const void*)", C.sizeof_CUdeviceptr}, // BIAS_POINTER's, passed as a CUdeviceptr
	}
}

// raw enqueues r's cublasLtMatmul n times on s from one C loop, with the
// same descriptors, algorithm and workspace: the floor the benchmarks set
// a gemm op against.
func (g *gemmer) raw(r *gemmRec, s C.CUstream, a, b, c, d, bias C.CUdeviceptr, n int) error {
	var cu C.CUresult
	st := C.dr_gemm_raw(g.lt.lib, g.drv.api, r.dev.ctx, r.c, b, a, c, d, bias, s, C.int(n), &cu)
	if err := g.drv.check("cuCtxSetCurrent", cu); err != nil {
		return err
	}
	if st != 0 {
		return g.lt.err("cublasLtMatmul", st)
	}
	return nil
}
