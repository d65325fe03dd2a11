package device_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	_ "github.com/dagrun/dagrun/executor/device/memdev"
)

// noFills refuses fills in bodies.
type noFills struct{}

func (noFills) CheckBody(ctl, op *dag.Op) error {
	if op.Kind == dag.Fill {
		return fmt.Errorf("no fill in a %s", ctl.Kind)
	}
	return nil
}

func TestCheckBodies(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("outside"))
	b.While(flag.All(), func(body *dag.Builder) {
		body.Fill(x.All(), 2, dag.Name("in_loop"))
		body.If(flag.All(), func(then *dag.Builder) {
			then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, float32(2))
		}, func(els *dag.Builder) {
			els.Fill(x.All(), 3, dag.Name("in_else"))
		}, dag.Name("branch"))
	}, dag.Name("loop"))
	g, err := b.Build()
	require.NoError(t, err)

	err = device.CheckBodies(noFills{}, g)
	require.Error(t, err)
	list, ok := err.(dag.ErrorList)
	require.True(t, ok, "%T", err)
	var got []string
	for _, e := range list {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`op "in_loop": no fill in a while (move it before or after the while loop)`,
		`op "in_else": no fill in a if (move it before or after the if branch)`,
	}, got, "every body op refused, nested ones included, and none outside a body")

	assert.NoError(t, device.CheckBodies(noFills{}, build(t, func(b *dag.Builder) {
		b.Fill(b.Buffer("y", 8, dag.Zeros()).All(), 0)
	})), "a graph without loops")
}

func build(t *testing.T, declare func(b *dag.Builder)) *dag.Graph {
	t.Helper()
	b := dag.New()
	declare(b)
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

func TestTopology(t *testing.T) {
	topo := device.Topology{Devices: []int{0, 1, 2}, Peer: map[[2]int]bool{{0, 1}: true, {1, 0}: true, {1, 2}: true}}
	assert.True(t, topo.PeerAccess(0, 1))
	assert.True(t, topo.PeerAccess(2, 2), "a device reaches itself")
	assert.False(t, topo.PeerAccess(1, 2), "peer access one way only goes through host memory")
	assert.Equal(t, "0<->1 peer, 0<->2 via host, 1<->2 via host", topo.String())
	assert.Equal(t, "1 device(s), no pairs", device.Topology{Devices: []int{0}}.String())
}

// TestMemRegistered: the in-memory backend opens by name and never
// under auto.
func TestMemRegistered(t *testing.T) {
	assert.Contains(t, device.Backends(), "mem")
	opened, err := device.Open("mem", device.Config{})
	require.NoError(t, err)
	assert.Equal(t, "mem", opened.Name)
	require.NoError(t, opened.Backend.Close())

	_, err = device.Open(device.Auto, device.Config{})
	assert.True(t, errors.Is(err, device.ErrNoDevice), "auto passes over a backend of preference 0: %v", err)
}
