package cuda

import "github.com/dagrun/dagrun/executor/device"

// Topology says which pairs of devices copy directly (peer access) and
// which through host memory; it is device.Topology, which the backend
// reports as a device.Topologist.
type Topology = device.Topology
