package executor

import (
	"maps"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Machine is what an open backend knows of its devices that changes a
// plan: which devices copy to each other directly, and the multiprocessor
// count that tells which kernels fill a device.
type Machine struct {
	Topology planner.Topology // nil: unknown, every copy between devices planned via the host
	SMs      int              // 0: unknown, the planner's default
}

// MachineOf is what backend b knows of its devices for graph g: device 0's
// multiprocessors (device.Describer), and the topology of g's devices
// (device.Topologist), asked only when g's buffers span devices, since
// asking opens each device it names.
func MachineOf(b device.Backend, g *dag.Graph) (Machine, error) {
	var m Machine
	if d, ok := b.(device.Describer); ok {
		if _, sms, err := d.DeviceInfo(0); err == nil {
			m.SMs = sms
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
	m.Topology = t
	return m, nil
}

// Known reports whether m tells the planner anything beyond its defaults.
func (m Machine) Known() bool {
	return m.Topology != nil || m.SMs != 0 && m.SMs != perf.DefaultSMs
}

// Options are the planner's options for what m knows (OnTopology, SMs);
// given after a caller's own, they override those.
func (m Machine) Options() []planner.Option {
	var opts []planner.Option
	if m.Topology != nil {
		opts = append(opts, planner.OnTopology(m.Topology))
	}
	if m.SMs != 0 {
		opts = append(opts, planner.SMs(m.SMs))
	}
	return opts
}
