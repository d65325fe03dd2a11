package cuda

/*
#include <stdlib.h>
#include "cublas.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// GEMM epilogues (dag.Epilogue) on cuBLASLt, and where it has none for a
// GEMM, the builtin kernels after the product.
//
// dagrun's matrices are row-major; cuBLASLt computes the column-major
// D^T = op(B)^T op(A)^T, an n x m matrix (colMajorShape). cuBLASLt's bias
// has one element per row of its D, m = n elements: element j is added to
// column j of dagrun's row-major result, as the builtin bias_add adds
// b[j] to y[r, j]. The bias is of D's dtype (BIAS_DATA_TYPE's default)
// and shared by the matrices of a batch (BIAS_BATCH_STRIDE's default, 0).
// cuBLASLt computes the epilogue in f32 for f32, f16 and bf16 GEMMs and
// rounds to D's dtype once, after it, as the cpu backend does.

// ltEpilogue is e's cublasLtEpilogue_t.
func ltEpilogue(e dag.Epilogue) C.uint32_t {
	switch e {
	case dag.EpiBias:
		return C.DR_LT_EPILOGUE_BIAS
	case dag.EpiGelu:
		return C.DR_LT_EPILOGUE_GELU
	case dag.EpiRelu:
		return C.DR_LT_EPILOGUE_RELU
	case dag.EpiBiasGelu:
		return C.DR_LT_EPILOGUE_GELU_BIAS
	case dag.EpiBiasRelu:
		return C.DR_LT_EPILOGUE_RELU_BIAS
	}
	return C.DR_LT_EPILOGUE_DEFAULT
}

// minBiasAlign is the alignment dagrun asks of a bias it hands cuBLASLt:
// what its vectorised kernels need of every other operand. cuBLASLt's
// preferences take no alignment for the bias, so one below this runs
// unfused rather than risk an algorithm that assumes more.
const minBiasAlign = 16

// biasProbe is the BIAS_POINTER the heuristic sees for a bias epilogue.
// cublasLt.h: "Routines that don't dereference this pointer, like
// cublasLtMatmulAlgoGetHeuristic() depend on its value to determine
// expected pointer alignment." A GEMM's algorithm is picked once for its
// signature (gemmKey) and called with every bias of that signature, a
// temporary's among them, whose address is known only at Run, and which
// operands checks to be aligned to minBiasAlign: the heuristic is told
// exactly that alignment, not the NULL (aligned to anything) or one
// persistent bias's address (often aligned to 256 or more). cublasLtMatmul
// is given the real address (dr_gemm_call).
const biasProbe = 1<<40 | minBiasAlign

// epilogueRefusal says why op's epilogue is not even asked of cuBLASLt,
// or "" when it is.
func epilogueRefusal(op *dag.Op) string {
	bi := op.Gemm.BiasAccess()
	if bi < 0 {
		return ""
	}
	if a := viewAlign(op.Access[bi].View); a < minBiasAlign {
		return fmt.Sprintf("the bias %s is aligned to %d bytes, below the %d dagrun hands cuBLASLt", op.Access[bi].View, a, minBiasAlign)
	}
	return ""
}

// epiLaunch is one builtin kernel that applies part of an unfused
// epilogue to the GEMM's output: bias_add(y = out, b = bias), gelu or
// relu (y = x = out). Its pointers are set before each run (setPointers).
type epiLaunch struct {
	l    *C.dr_launch
	bias bool // its second buffer is the bias, not the output
}

// prepareUnfused loads the builtin kernels of r's epilogue on d and
// builds their launches over op's output, which must be one dense run of
// elements, as the builtins see a view.
func (gh *gemmHooks) prepareUnfused(d *sessDevice, r *gemmRec, op *dag.Op) error {
	s := op.Gemm
	dt := op.Access[dag.GemmA].Buf.DType
	l := s.LayoutC()
	if l.LD != s.N || s.Batch > 1 && l.Stride != s.M*s.N {
		return fmt.Errorf("epilogue %s must run apart from the product (%s), and the builtin kernels cannot skip the gaps of an output with ldc %d or stride_c %d",
			s.Epilogue, r.unfused, l.LD, l.Stride)
	}
	n := s.Batch * s.M * s.N
	var kernels []*dag.Kernel
	if s.Epilogue.HasBias() {
		kernels = append(kernels, dag.BiasAdd)
	}
	switch s.Epilogue.Activation() {
	case dag.EpiGelu:
		kernels = append(kernels, dag.Gelu)
	case dag.EpiRelu:
		kernels = append(kernels, dag.Relu)
	}
	for _, base := range kernels {
		k := base.Variant(dt)
		if k == nil {
			return fmt.Errorf("builtin %s has no %s variant", base.Name, dt)
		}
		f, ok := d.funcs[k]
		if !ok {
			var err error
			if f, err = gh.b.kernel(d.gpu, k); err != nil {
				return fmt.Errorf("builtin %s for the unfused epilogue %s: %w", k.Name, s.Epilogue, err)
			}
			d.funcs[k] = f
		}
		cl := C.dr_launch_new(4)
		if cl == nil {
			return fmt.Errorf("out of host memory")
		}
		r.launches = append(r.launches, epiLaunch{l: cl, bias: base == dag.BiasAdd})
		cl.f = f
		// The element loops stride over the grid: enough blocks to fill
		// the device, 8 elements a thread where 16-byte aligned.
		cl.gx, cl.gy, cl.gz = C.uint(min(max((n+2047)/2048, 1), 1<<16)), 1, 1
		cl.bx, cl.by, cl.bz = 256, 1, 1
		slots := unsafe.Slice(cl.slots, 4)
		slots[1], slots[3] = C.uint64_t(n), C.uint64_t(n)
		if base == dag.BiasAdd {
			slots[3] = C.uint64_t(s.N)
		}
	}
	return nil
}

// setPointers stores the output's and the bias's addresses now in r's
// launches.
func (r *gemmRec) setPointers(out, bias C.CUdeviceptr) {
	for _, e := range r.launches {
		slots := unsafe.Slice(e.l.slots, 4)
		slots[0], slots[2] = C.uint64_t(out), C.uint64_t(out)
		if e.bias {
			slots[2] = C.uint64_t(bias)
		}
	}
}

// runUnfused enqueues r's epilogue launches on s, after its product.
func (gh *gemmHooks) runUnfused(r *gemmRec, s *stream) error {
	for _, e := range r.launches {
		if err := gh.drv.check("cuLaunchKernel", C.dr_launch_kernel(gh.drv.api, s.dev.ctx, e.l, s.h)); err != nil {
			return err
		}
	}
	return nil
}

// freeLaunches frees r's epilogue launches.
func (r *gemmRec) freeLaunches() {
	for _, e := range r.launches {
		C.free(unsafe.Pointer(e.l))
	}
	r.launches = nil
}

// unfusedOps lists the session's GEMMs that run their epilogue as builtin
// kernels after the product, and why.
func (gh *gemmHooks) unfusedOps() []device.Unfused {
	if gh.gemm == nil {
		return nil
	}
	var out []device.Unfused
	for _, r := range gh.gemm.recs {
		if r.unfused != "" {
			out = append(out, device.Unfused{Op: r.name, Epilogue: r.epilogue.String(), Why: r.unfused})
		}
	}
	slices.SortFunc(out, func(a, b device.Unfused) int { return strings.Compare(a.Op, b.Op) })
	return out
}
