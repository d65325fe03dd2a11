package cpu

import "github.com/dagrun/dagrun/executor/device"

// The CPU backend is "cpu" to device.Open, and auto's choice where no
// other backend opens.
func init() {
	device.Register("cpu", 1, func(device.Config) (device.Backend, error) { return New(), nil })
}
