package executor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// describing is a cpu backend that says it has devices with sms
// multiprocessors and peer access between 0 and 1, and records what it
// was asked.
type describing struct {
	*cpu.Backend
	sms   int
	asked [][]int
}

func (d *describing) DeviceInfo(int) (string, int, error) { return "fake", d.sms, nil }
func (d *describing) DriverVersion() int                  { return 13000 }
func (d *describing) TopologyOf(devs ...int) (device.Topology, error) {
	d.asked = append(d.asked, devs)
	return device.Topology{Devices: devs, Peer: map[[2]int]bool{{0, 1}: true, {1, 0}: true}}, nil
}

// MachineOf asks a backend for the topology only when the graph spans
// devices, and Apply puts what it knows into the planner's options.
func TestMachineOf(t *testing.T) {
	graph := func(devices ...int) *dag.Graph {
		b := dag.New()
		for _, d := range devices {
			x := b.Buffer(fmt.Sprintf("x%d", d), 16, dag.OnDevice(d), dag.Zeros())
			b.Fill(x.All(), 1, dag.OnDevice(d))
		}
		g, err := b.Build()
		require.NoError(t, err)
		return g
	}
	t.Run("one device", func(t *testing.T) {
		d := &describing{Backend: cpu.New(), sms: 66}
		defer d.Close()
		m, err := executor.MachineOf(d, graph(0))
		require.NoError(t, err)
		assert.Empty(t, d.asked, "a graph on one device needs no topology")
		assert.Nil(t, m.Topology)
		assert.Equal(t, 66, m.SMs)
		assert.True(t, m.Known())
		var o planner.Options
		for _, set := range m.Options() {
			set(&o)
		}
		assert.Equal(t, 66, o.SMs)
	})
	t.Run("two devices", func(t *testing.T) {
		d := &describing{Backend: cpu.New(), sms: perf.DefaultSMs}
		defer d.Close()
		m, err := executor.MachineOf(d, graph(0, 1))
		require.NoError(t, err)
		assert.Equal(t, [][]int{{0, 1}}, d.asked)
		require.NotNil(t, m.Topology)
		assert.True(t, m.Topology.PeerAccess(0, 1))
		assert.True(t, m.Known())
	})
	t.Run("a backend that knows nothing", func(t *testing.T) {
		b := cpu.New()
		defer b.Close()
		m, err := executor.MachineOf(b, graph(0, 1))
		require.NoError(t, err)
		assert.False(t, m.Known())
		assert.Empty(t, m.Options(), "what the machine does not know, it does not set")
	})
}
