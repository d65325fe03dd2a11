package memdev_test

import (
	"testing"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/device/devicetest"
	"github.com/dagrun/dagrun/executor/device/memdev"
)

// TestConformance holds the in-memory backend to the device contract,
// with the cpu backend's results as the reference.
func TestConformance(t *testing.T) {
	devicetest.Run(t, func(*testing.T) device.Backend { return memdev.New() },
		devicetest.Reference(func(*testing.T) device.Backend { return cpu.New() }),
		devicetest.Devices(2))
}
