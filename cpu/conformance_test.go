package cpu_test

import (
	"testing"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/device/devicetest"
)

// TestConformance holds the cpu backend to the device contract. It is its
// own reference: the op-kind cases then check that its results do not
// depend on how a plan runs (eager, replayed, one world or another).
func TestConformance(t *testing.T) {
	devicetest.Run(t, func(*testing.T) device.Backend { return cpu.New() }, devicetest.Devices(2))
}
