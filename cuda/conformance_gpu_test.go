//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/device/devicetest"
)

// TestConformanceGPU holds the cuda backend to the device contract, every
// result against the cpu backend's; the cases of a world of two ranks
// run where the machine has two devices. Without a driver it skips
// (fails under DAGRUN_REQUIRE_GPU=1).
func TestConformanceGPU(t *testing.T) {
	n, err := gpuBackend(t).drv.deviceCount()
	require.NoError(t, err)
	cache := t.TempDir() // one NVRTC cache: the builtins compile once
	devicetest.Run(t, func(t *testing.T) device.Backend { return gpuBackend(t, CacheDir(cache)) },
		devicetest.Reference(func(*testing.T) device.Backend { return cpu.New() }),
		devicetest.Devices(n))
}
