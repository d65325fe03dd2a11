package device

import (
	"fmt"
	"strings"
)

// Describer is implemented by backends that name their devices (the cuda
// backend): perf models are keyed by what it says, and the planner sizes
// kernels by the multiprocessor count. A backend without it is this
// host's CPU to both.
type Describer interface {
	// DeviceInfo returns device dev's name and multiprocessor count.
	DeviceInfo(dev int) (name string, sms int, err error)
	// DriverVersion is the version of the driver the backend runs on.
	DriverVersion() int
}

// Topologist is implemented by backends that know which of their devices
// copy to each other directly (the cuda backend), which the planner uses
// to route copies between devices.
type Topologist interface {
	// TopologyOf opens only the devices given (a plan's, not every
	// visible one: each may cost 100 ms or more to open) and reports
	// which pairs of them have peer access.
	TopologyOf(devices ...int) (Topology, error)
}

// Topology says which pairs of devices copy directly (peer access) and
// which through host memory. It satisfies planner.Topology.
type Topology struct {
	Devices []int // the ordinals it describes, ascending
	// Peer holds the [from, to] pairs with peer access enabled from from
	// to to; a pair absent is false.
	Peer map[[2]int]bool
}

// PeerAccess reports whether a copy between devices from and to goes over
// the link (peer access enabled in both directions) rather than through
// host memory.
func (t Topology) PeerAccess(from, to int) bool {
	return from == to || (t.Peer[[2]int{from, to}] && t.Peer[[2]int{to, from}])
}

// String lists the pairs, for example "0<->1 peer".
func (t Topology) String() string {
	var parts []string
	for i, a := range t.Devices {
		for _, b := range t.Devices[i+1:] {
			how := "via host"
			if t.PeerAccess(a, b) {
				how = "peer"
			}
			parts = append(parts, fmt.Sprintf("%d<->%d %s", a, b, how))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d device(s), no pairs", len(t.Devices))
	}
	return strings.Join(parts, ", ")
}
