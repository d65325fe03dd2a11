//go:build !cgo

package main

import (
	"errors"

	"github.com/dagrun/dagrun/dag"
)

// Without cgo there is no cuBLAS to call, and no CUDA backend to call it
// for (cuda.New fails), so the example runs on the CPU backend only.
type cublasLib struct{}

func openCublas() (*cublasLib, error) {
	return nil, errors.New("cublas_task was built without cgo: cuBLAS cannot be called")
}

func (*cublasLib) Close() {}

func (*cublasLib) sgemm(m, n, k int) dag.TaskFunc { return nil }
