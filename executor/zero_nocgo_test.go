//go:build !cgo

package executor_test

import (
	"context"

	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
)

// cudaZeroCases are TestZeroValuesWorkOrFailAtOnce's calls on the cuda
// package's zero values; without cgo it has only the backend.
func cudaZeroCases(ctx context.Context, g *dag.Graph, _ *dag.Op, _ *dag.Buffer, mustErr, ignore func(error) error) map[string]func() error {
	return map[string]func() error{
		"cuda.Backend.Open":       func() error { _, err := (&cuda.Backend{}).Open(ctx, g); return mustErr(err) },
		"cuda.Backend.DeviceInfo": func() error { _, _, err := (&cuda.Backend{}).DeviceInfo(0); return mustErr(err) },
		"cuda.Backend.Topology":   func() error { _, err := (&cuda.Backend{}).Topology(); return mustErr(err) },
		"cuda.Backend.Close":      func() error { return ignore((&cuda.Backend{}).Close()) },
	}
}
