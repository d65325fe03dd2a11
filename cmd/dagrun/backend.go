package main

import (
	"fmt"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/executor/device"
)

var backendNames = []string{"auto", "cpu", "cuda"}

// backendAliases are the other names users try: gpu means cuda.
var backendAliases = map[string]string{"gpu": "cuda"}

func backendFlag() *oneOf { return &oneOf{choices: backendNames, aliases: backendAliases} }

// openBackend returns the backend called name and the name of the one it
// picked: auto is cuda when a CUDA driver and device are there, else cpu,
// and then fallback says why.
func openBackend(name string) (b device.Backend, used, fallback string, err error) {
	if to, ok := backendAliases[name]; ok {
		name = to
	}
	switch name {
	case "cpu":
		return cpu.New(), "cpu", "", nil
	case "cuda":
		b, err := cuda.New()
		if err != nil {
			return nil, "", "", fmt.Errorf("the CUDA backend is not available: %w (use --backend cpu or auto)", err)
		}
		return b, "cuda", "", nil
	case "auto":
		b, err := cuda.New()
		if err == nil {
			return b, "cuda", "", nil
		}
		return cpu.New(), "cpu", err.Error(), nil
	}
	return nil, "", "", fmt.Errorf("unknown backend %q", name)
}
