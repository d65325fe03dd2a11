package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// The GEMM hooks of a Session: prepare at Open, run at Run, release at
// Close. The machinery is the gemmer's (cublas.go). Each session has its
// own gemmer, so its algorithms and workspaces are its own and never
// shared between sessions running side by side.

// gemmHooks runs a session's GEMMs through its own gemmer.
type gemmHooks struct {
	b    *Backend
	drv  *driver
	hold *holdings

	gemm *gemmer // cuBLASLt handles, algorithms and workspaces, made at the first gemm
}

// prepareGemm makes op's cuBLASLt GEMM ready, loading cuBLASLt for the
// session's first one.
func (gh *gemmHooks) prepareGemm(st *opState, op *dag.Op) error {
	d, err := gh.hold.device(op.Device)
	if err != nil {
		return err
	}
	if gh.gemm == nil {
		gh.gemm = newGemmer(gh.drv, gh.b.lt)
		if l := gh.hold.lender; l != nil {
			gh.gemm.borrow = l.owner.lendWorkspace // shared.go
		}
	}
	r, err := gh.gemm.prepare(d.gpu, op)
	if err != nil {
		return err
	}
	if r.unfused != "" && r.launches == nil {
		if err := gh.prepareUnfused(d, r, op); err != nil { // epilogue.go
			return err
		}
	}
	st.act = actGemm
	return nil
}

// runGemm enqueues op's GEMM on s, and the kernels of an epilogue
// cuBLASLt had no algorithm for after it.
func (gh *gemmHooks) runGemm(s *stream, op *dag.Op) error {
	r, ptr, err := gh.operands(s, op)
	if err != nil {
		return err
	}
	if err := gh.gemm.run(r, s.h, ptr[dag.GemmA], ptr[dag.GemmB], ptr[dag.GemmC], ptr[dag.GemmD], ptr[gemmBias]); err != nil {
		return err
	}
	return gh.runUnfused(r, s) // epilogue.go
}

// gemmBias is the place of the bias among operands' addresses.
const gemmBias = 4

// operands are op's prepared GEMM and the device addresses of its A, B, C,
// D and bias (0 without a bias epilogue) now, checked against s's device
// and the alignments its algorithm was picked for. An unfused epilogue's
// launches get the output's and the bias's addresses.
func (gh *gemmHooks) operands(s *stream, op *dag.Op) (*gemmRec, [5]C.CUdeviceptr, error) {
	var ptr [5]C.CUdeviceptr
	var r *gemmRec
	if gh.gemm != nil {
		r = gh.gemm.recs[op.Gemm]
	}
	if r == nil {
		return nil, ptr, errors.New("gemm was not prepared at Open")
	}
	if r.dev != s.dev.gpu {
		return nil, ptr, fmt.Errorf("gemm of device %d runs on a stream of device %d", r.dev.ordinal, s.dev.ordinal)
	}
	for i := range gemmBias {
		a := op.Access[min(i, op.Gemm.OutAccess())]
		bs := &gh.hold.bufs[a.Buf.ID]
		if bs.dptr == 0 {
			return nil, ptr, fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		ptr[i] = gh.hold.ptr(a.View)
		if uint64(ptr[i])%uint64(r.align[i]) != 0 {
			return nil, ptr, fmt.Errorf("operand %c at %#x is not aligned to the %d bytes its cuBLASLt algorithm was picked for",
				"abcd"[i], uint64(ptr[i]), r.align[i])
		}
	}
	if bi := op.Gemm.BiasAccess(); bi >= 0 && bi < len(op.Access) {
		v := op.Access[bi].View
		if gh.hold.bufs[v.Buf.ID].dptr == 0 {
			return nil, ptr, fmt.Errorf("temporary buffer %s is not allocated", v.Buf.Name)
		}
		ptr[gemmBias] = gh.hold.ptr(v)
		if r.unfused == "" && uint64(ptr[gemmBias])%minBiasAlign != 0 {
			return nil, ptr, fmt.Errorf("the bias at %#x is not aligned to the %d bytes cuBLASLt's epilogue was asked with", uint64(ptr[gemmBias]), minBiasAlign)
		}
	}
	r.setPointers(ptr[op.Gemm.OutAccess()], ptr[gemmBias])
	return r, ptr, nil
}

// Unfused does the work of Session.Unfused.
func (gh *gemmHooks) Unfused() []device.Unfused { return gh.unfusedOps() }

// closeGemm releases the session's GEMM resources; its streams must be idle.
func (gh *gemmHooks) closeGemm() error {
	if gh.gemm == nil {
		return nil
	}
	return gh.gemm.close()
}
