package planner_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// pairs is a Topology with peer access between the listed pairs, both ways.
type pairs map[[2]int]bool

func (p pairs) PeerAccess(from, to int) bool { return p[[2]int{from, to}] || p[[2]int{to, from}] }

func TestCopyPath(t *testing.T) {
	b := dag.New()
	a0 := b.Buffer("a0", 1024, dag.OnDevice(0), dag.Zeros())
	a1 := b.Buffer("a1", 1024, dag.OnDevice(1), dag.Zeros())
	a2 := b.Buffer("a2", 1024, dag.OnDevice(2), dag.Zeros())
	c0 := b.Buffer("c0", 1024, dag.OnDevice(0), dag.Zeros())
	h := b.Buffer("h", 1024, dag.PinnedHost(), dag.Zeros())
	b.Copy(a1.All(), a0.All(), dag.Name("to1"), dag.OnDevice(1))
	b.Copy(a2.All(), a1.All(), dag.Name("to2"), dag.OnDevice(2))
	b.Copy(c0.All(), a0.All(), dag.Name("local"))
	b.Copy(h.All(), c0.All(), dag.Name("down"))
	g, err := b.Build()
	require.NoError(t, err)
	ops := map[string]*dag.Op{}
	for _, op := range g.Ops {
		ops[op.Name] = op
	}
	tests := []struct {
		name string
		topo planner.Topology
		want map[string]string
	}{
		{"unknown", nil, map[string]string{"to1": "topology unknown", "to2": "topology unknown", "local": "", "down": ""}},
		{"nvlink 0-1", pairs{{0, 1}: true}, map[string]string{"to1": "peer", "to2": "via host", "local": "", "down": ""}},
		{"none", pairs{}, map[string]string{"to1": "via host", "to2": "via host", "local": "", "down": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planner.New(g, planner.OnTopology(tt.topo))
			require.NoError(t, err)
			for name, want := range tt.want {
				assert.Equal(t, want, p.CopyPath(ops[name]), name)
			}
			var sb strings.Builder
			require.NoError(t, p.WriteText(&sb))
			if tt.topo == nil {
				assert.Contains(t, sb.String(), "copy to1")
				assert.Contains(t, sb.String(), "[topology unknown]")
			} else {
				assert.Contains(t, sb.String(), "[via host]")
			}
		})
	}
}
