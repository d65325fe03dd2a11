package main

import (
	"errors"
	"fmt"
	"strings"

	_ "github.com/dagrun/dagrun/cpu"
	_ "github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/executor/device"
)

// backendNames are the choices of --backend: auto and every registered
// backend but the test doubles.
var backendNames = []string{device.Auto, "cpu", "cuda"}

// backendAliases are the other names users try: gpu means cuda.
var backendAliases = map[string]string{"gpu": "cuda"}

func backendFlag() *oneOf { return &oneOf{choices: backendNames, aliases: backendAliases} }

// openBackend returns the backend called name and the name of the one it
// picked: auto is cuda when a CUDA driver and device are there, else cpu,
// and then fallback says why.
// noPeer makes a cuda backend copy between devices through host memory.
func openBackend(name string, noPeer bool) (b device.Backend, used, fallback string, err error) {
	if to, ok := backendAliases[name]; ok {
		name = to
	}
	o, err := device.Open(name, device.Config{NoPeer: noPeer})
	if err != nil {
		if name != device.Auto && !errors.Is(err, device.ErrUnknownBackend) {
			err = fmt.Errorf("%w (use --backend cpu or auto)", err)
		}
		return nil, "", "", err
	}
	return o.Backend, o.Name, strings.TrimPrefix(o.Fallback, "cuda: "), nil
}

// openBackend opens --backend's backend for dagrun run, saying on stderr
// when auto fell back to the CPU backend.
func (c *cli) openBackend(f *runFlags) (device.Backend, string, error) {
	b, used, fallback, err := openBackend(f.backend.value, f.noPeer)
	if err == nil && fallback != "" {
		fmt.Fprintf(c.stderr, "dagrun run: note: %s\n", fallbackNote(fallback, f.verbose))
	}
	return b, used, err
}

// fallbackNote is what run says when auto fell back to the CPU backend
// because of why (the CUDA backend's error): the reason in a few words,
// or with verbose all of it (every library path tried).
func fallbackNote(why string, verbose bool) string {
	if verbose {
		return "running on the CPU backend: " + why + " (--backend cpu silences this note)"
	}
	short, _, _ := strings.Cut(why, ": ")
	return "running on the CPU backend: " + short + " (-v for details; --backend cpu silences this note)"
}
