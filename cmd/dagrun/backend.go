package main

import (
	"fmt"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/executor/device"
)

var backendNames = []string{"auto", "cpu", "cuda"}

// openBackend returns the backend called name and the name of the one it
// picked: auto is cuda when a CUDA driver and device are there, else cpu.
func openBackend(name string) (device.Backend, string, error) {
	switch name {
	case "cpu":
		return cpu.New(), "cpu", nil
	case "cuda":
		b, err := cuda.New()
		if err != nil {
			return nil, "", fmt.Errorf("the CUDA backend is not available: %w (use --backend cpu or auto)", err)
		}
		return b, "cuda", nil
	case "auto":
		if b, err := cuda.New(); err == nil {
			return b, "cuda", nil
		}
		return cpu.New(), "cpu", nil
	}
	return nil, "", fmt.Errorf("unknown backend %q", name)
}
