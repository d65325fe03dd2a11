//go:build !cgo

package cuda

import (
	"context"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// errNoCgo is New's error in a build without cgo: the driver is reached
// only through C, so such a build has no CUDA backend at all. It matches
// ErrNoDriver, so callers that fall back to the CPU backend do so here too.
var errNoCgo error = noCgoError{}

type noCgoError struct{}

func (noCgoError) Error() string {
	return "this dagrun was built without cgo (CGO_ENABLED=0, or no C compiler), so it has no CUDA backend; rebuild with a C compiler and CGO_ENABLED=1 to use the GPU"
}

func (noCgoError) Is(target error) bool { return target == ErrNoDriver || target == device.ErrNoDevice }

// Backend is the CUDA backend's place in a build without cgo: New never
// makes one, and its methods report errNoCgo.
type Backend struct{}

// New reports that this build has no CUDA backend; the error matches
// ErrNoDriver.
func New(opts ...Option) (*Backend, error) { return nil, errNoCgo }

// Open reports errNoCgo.
func (b *Backend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	return nil, errNoCgo
}

// Close does nothing.
func (b *Backend) Close() error { return nil }

// DeviceInfo reports errNoCgo.
func (b *Backend) DeviceInfo(ordinal int) (name string, sms int, err error) {
	return "", 0, errNoCgo
}

// DriverVersion is 0: there is no driver.
func (b *Backend) DriverVersion() int { return 0 }

// Topology reports errNoCgo.
func (b *Backend) Topology() (Topology, error) { return Topology{}, errNoCgo }

// TopologyOf reports errNoCgo.
func (b *Backend) TopologyOf(devices ...int) (Topology, error) { return Topology{}, errNoCgo }
