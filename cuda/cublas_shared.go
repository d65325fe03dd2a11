package cuda

/*
#include "cublas.h"
*/
import "C"

import (
	"errors"
	"sync"
)

// ltShared is what the sessions of one Backend share of cuBLASLt, so that
// opening a session with GEMMs costs no library load, no handle and no
// heuristic for a signature seen before:
//   - the library, loaded at the first GEMM of any session and kept while
//     the process runs (cuBLASLt carries CUDA runtime state that unloading
//     it does not promise to clean up);
//   - a handle per device, made at its first GEMM and destroyed when the
//     Backend closes. cuBLASLt functions may be called from several host
//     threads with one handle; a cuBLASLt handle holds no stream and no
//     workspace (each cublasLtMatmul passes its own), so sessions running
//     side by side share nothing through it;
//   - the algorithm picked for each signature: a value that depends on the
//     signature and the device alone. Workspaces stay each GEMM's own.
type ltShared struct {
	drv        *driver
	candidates []string // where to look for the library

	mu      sync.Mutex // guards what follows
	lt      *cublasLt
	handles map[int]ltHandle // by device ordinal
	algos   map[gemmKey]gemmAlgo
}

func newLtShared(drv *driver, candidates []string) *ltShared {
	return &ltShared{drv: drv, candidates: candidates, handles: map[int]ltHandle{}, algos: map[gemmKey]gemmAlgo{}}
}

// library is the loaded cuBLASLt, loading it the first time.
func (l *ltShared) library() (*cublasLt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lt == nil {
		lt, err := openCuBLASLt(l.candidates)
		if err != nil {
			return nil, err
		}
		l.lt = lt
	}
	return l.lt, nil
}

// handle is device d's handle, made the first time.
func (l *ltShared) handle(d *gpu) (ltHandle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lt == nil {
		return ltHandle{}, errors.New("cuBLASLt is not loaded")
	}
	if h, ok := l.handles[d.ordinal]; ok && h.ctx == d.ctx {
		return h, nil
	}
	var h ltHandle
	var cu C.CUresult
	st := C.dr_lt_create(l.lt.lib, l.drv.api, d.ctx, &h.h, &cu)
	if err := l.drv.check("cuCtxSetCurrent", cu); err != nil {
		return ltHandle{}, err
	}
	if st != 0 {
		return ltHandle{}, l.lt.err("cublasLtCreate", st)
	}
	h.ctx = d.ctx
	l.handles[d.ordinal] = h
	return h, nil
}

// algo is the algorithm picked for key, if one was.
func (l *ltShared) algo(key gemmKey) (gemmAlgo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.algos[key]
	return a, ok
}

// keep notes a as the algorithm of key.
func (l *ltShared) keep(key gemmKey, a gemmAlgo) {
	l.mu.Lock()
	l.algos[key] = a
	l.mu.Unlock()
}

// close destroys the handles, each in its context, which must still be
// retained; the sessions that used them are closed.
func (l *ltShared) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for ord, h := range l.handles {
		var cu C.CUresult
		st := C.dr_lt_destroy(l.lt.lib, l.drv.api, h.ctx, h.h, &cu)
		if err := l.drv.check("cuCtxSetCurrent", cu); err != nil {
			errs = append(errs, err)
		} else if st != 0 {
			errs = append(errs, l.lt.err("cublasLtDestroy", st))
		}
		delete(l.handles, ord)
	}
	clear(l.algos)
	return errors.Join(errs...)
}
