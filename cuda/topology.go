package cuda

import (
	"fmt"
	"strings"
)

// Topology says which pairs of devices copy directly (peer access) and
// which through host memory. It satisfies planner.Topology.
type Topology struct {
	Devices []int           // the ordinals it describes, ascending
	access  map[[2]int]bool // [from, to]
}

// PeerAccess reports whether a copy between devices from and to goes over
// the link (peer access enabled in both directions) rather than through
// host memory.
func (t Topology) PeerAccess(from, to int) bool {
	return from == to || (t.access[[2]int{from, to}] && t.access[[2]int{to, from}])
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
