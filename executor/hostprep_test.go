package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
)

// preparing is a cpu backend that reports its memories apart, as a GPU
// backend does, prepares host buffers, and logs each call.
type preparing struct {
	*cpu.Backend
	log        []string
	deviceFree int64 // what FreeMemory reports of the device
	hostFree   int64
	openErr    error
}

func (p *preparing) DevicesInHostMemory() bool { return false }

func (p *preparing) FreeMemory(dev int) (free, total int64, err error) {
	if dev == device.HostMemory {
		p.log = append(p.log, "host memory")
		return p.hostFree, p.hostFree, nil
	}
	p.log = append(p.log, "device memory")
	return p.deviceFree, p.deviceFree, nil
}

func (p *preparing) PrepareHost(g *dag.Graph) func() {
	p.log = append(p.log, "prepare")
	return func() { p.log = append(p.log, "release") }
}

func (p *preparing) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	p.log = append(p.log, "open")
	if p.openErr != nil {
		return nil, p.openErr
	}
	return p.Backend.Open(ctx, g)
}

// TestOpenPreparesHostBetweenAdmissions: Open asks a HostPreparer to make
// host buffers once host memory is admitted and before the devices'
// memory is asked for (a CUDA context is made then), and releases them
// when the devices refuse or the backend's Open fails.
func TestOpenPreparesHostBetweenAdmissions(t *testing.T) {
	const big = 1 << 20
	p := hugePlan(t, big, dag.PinnedHost()) // a host buffer and a device one
	refused := errors.New("no session")
	for _, c := range []struct {
		name                string
		hostFree, devFree   int64
		openErr             error
		want                []string
		memoryErr, openErrs bool
	}{
		{"admitted", 1 << 40, 1 << 40, nil, []string{"host memory", "prepare", "device memory", "open"}, false, false},
		{"host refused", 16, 1 << 40, nil, []string{"host memory"}, true, false},
		{"device refused", 1 << 40, 8, nil, []string{"host memory", "prepare", "device memory", "release"}, true, false},
		{"open failed", 1 << 40, 1 << 40, refused, []string{"host memory", "prepare", "device memory", "open", "release"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &preparing{Backend: cpu.New(), hostFree: c.hostFree, deviceFree: c.devFree, openErr: c.openErr}
			defer b.Close()
			s, err := executor.Open(context.Background(), b, p)
			if err == nil {
				require.NoError(t, s.Close())
			}
			assert.Equal(t, c.want, b.log)
			_, isMem := errors.AsType[*executor.MemoryError](err)
			assert.Equal(t, c.memoryErr, isMem, "%v", err)
			assert.Equal(t, c.openErrs, errors.Is(err, refused), "%v", err)
		})
	}
}

// TestShapesPrepareHost: the memory a Shapes holds for its shapes is
// opened as a session is, its host buffers made ahead (PrepareHost before
// the backend's Open), and released when that Open fails.
func TestShapesPrepareHost(t *testing.T) {
	refused := errors.New("no memory")
	for _, c := range []struct {
		name    string
		openErr error
		want    []string
	}{
		{"opened", nil, []string{"prepare", "open"}},
		{"open failed", refused, []string{"prepare", "open", "release"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &preparing{Backend: cpu.New(), hostFree: 1 << 40, deviceFree: 1 << 40, openErr: c.openErr}
			defer b.Close()
			sh, err := executor.OpenShapes(context.Background(), b, shapeProgram)
			require.NoError(t, err)
			defer sh.Close()
			b.log = nil
			_, err = sh.Run(context.Background(), at(64))
			assert.Equal(t, c.openErr != nil, errors.Is(err, refused), "%v", err)
			var calls []string
			for _, call := range b.log {
				if call != "host memory" && call != "device memory" {
					calls = append(calls, call)
				}
			}
			// The holder's open comes first; a shape's session opens over it.
			require.GreaterOrEqual(t, len(calls), len(c.want), "%v", b.log)
			assert.Equal(t, c.want, calls[:len(c.want)], "%v", b.log)
		})
	}
}
