package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"

	"github.com/dagrun/dagrun/dag"
)

// The GEMM hooks of the Backend: prepare at Open, run at Run, release at
// Close. The machinery is the gemmer's (cublas.go).

// prepareGemm makes op's cuBLASLt GEMM ready, loading cuBLASLt for the
// first one.
func (b *Backend) prepareGemm(st *opState, op *dag.Op) error {
	d, err := b.device(op.Device)
	if err != nil {
		return err
	}
	if b.gemm == nil {
		b.gemm = newGemmer(b.drv, cublasLtCandidates(os.Getenv("DAGRUN_CUBLASLT")))
	}
	if _, err := b.gemm.prepare(d, op); err != nil {
		return err
	}
	st.act = actGemm
	return nil
}

// runGemm enqueues op's GEMM on s.
func (b *Backend) runGemm(s *stream, op *dag.Op) error {
	if b.gemm == nil || b.gemm.recs[op.Gemm] == nil {
		return errors.New("gemm was not prepared at Open")
	}
	r := b.gemm.recs[op.Gemm]
	if r.dev != s.dev {
		return fmt.Errorf("gemm of device %d runs on a stream of device %d", r.dev.ordinal, s.dev.ordinal)
	}
	var ptr [4]C.CUdeviceptr
	for i := range ptr {
		a := op.Access[min(i, op.Gemm.OutAccess())]
		bs := &b.bufs[a.Buf.ID]
		if bs.dptr == 0 {
			return fmt.Errorf("temporary buffer %s is not allocated", bs.b.Name)
		}
		ptr[i] = b.ptr(a.View)
	}
	return b.gemm.run(r, s.h, ptr[dag.GemmA], ptr[dag.GemmB], ptr[dag.GemmC], ptr[dag.GemmD])
}

// closeGemm releases the GEMMs' resources; the devices must be idle.
func (b *Backend) closeGemm() error {
	if b.gemm == nil {
		return nil
	}
	return b.gemm.close()
}
