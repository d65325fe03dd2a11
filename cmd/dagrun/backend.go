package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	_ "github.com/dagrun/dagrun/cpu"
	_ "github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
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

// machine is what an open backend knows that changes a plan: which
// devices copy to each other directly (nil: unknown) and the
// multiprocessor count that tells which kernels fill a device (0: the
// planner's default).
type machine struct {
	topo planner.Topology
	sms  int
}

// known reports whether m tells the planner anything beyond its defaults.
func (m machine) known() bool { return m.topo != nil || m.sms != 0 && m.sms != planner.DefaultSMs }

// machineOf is what backend b knows of its devices for graph g: the
// topology only when g's buffers span devices (asking would open every
// visible device), and device 0's multiprocessors.
func machineOf(b device.Backend, g *dag.Graph) (machine, error) {
	var m machine
	if d, ok := b.(device.Describer); ok {
		if _, sms, err := d.DeviceInfo(0); err == nil {
			m.sms = sms
		}
	}
	tb, ok := b.(device.Topologist)
	if !ok {
		return m, nil
	}
	devices := map[int]bool{}
	for _, buf := range g.Buffers {
		if buf.Placement == dag.Device {
			devices[buf.Device] = true
		}
	}
	if len(devices) < 2 {
		return m, nil
	}
	for _, op := range g.Ops {
		devices[op.Device] = true
	}
	t, err := tb.TopologyOf(slices.Sorted(maps.Keys(devices))...)
	if err != nil {
		return m, err
	}
	m.topo = t
	return m, nil
}
