package plan

import "github.com/dagrun/dagrun/dag"

// Topology tells the planner which devices copy to each other directly
// (peer access over NVLink or PCIe) and which through host memory. A
// backend that has opened its devices knows it (cuda.Backend.Topology);
// nil (no planner.OnTopology) means unknown, as when a plan is made without a backend.
type Topology interface {
	PeerAccess(from, to int) bool
}

// CopyPath names how a copy between two devices goes under the plan's
// topology: "peer", "via host" or "topology unknown"; "" for any other op.
func (p *Plan) CopyPath(op *dag.Op) string {
	if op == nil || op.Kind.Info().Class != dag.CopyClass || len(op.Access) != 2 {
		return ""
	}
	src, dst := op.Access[0].Buf, op.Access[1].Buf
	if src == nil || dst == nil || src.Placement != dag.Device || dst.Placement != dag.Device || src.Device == dst.Device {
		return ""
	}
	switch {
	case p.Topology == nil:
		return "topology unknown"
	case p.Topology.PeerAccess(src.Device, dst.Device):
		return "peer"
	}
	return "via host"
}
