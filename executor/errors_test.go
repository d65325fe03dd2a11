package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Each lifecycle misuse is an error that errors.Is tells apart, whichever
// layer (executor or backend) refused it, and says what was refused.
func TestLifecycleErrorsAreSentinels(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		want error
		text string
		do   func(t *testing.T, b *cpu.Backend) error
	}{
		{"Run after Close", executor.ErrClosed, "Run: session is closed", func(t *testing.T, b *cpu.Backend) error {
			s := open(t, b, spinPlan(t, 1, 1))
			require.NoError(t, s.Close())
			return s.Run(ctx)
		}},
		{"Read after Close", executor.ErrClosed, "Read: session is closed", func(t *testing.T, b *cpu.Backend) error {
			p := spinPlan(t, 1, 1)
			s := open(t, b, p)
			require.NoError(t, s.Close())
			_, err := s.Read(p.Graph.Buffers[0])
			return err
		}},
		{"Capture after Close", executor.ErrClosed, "Capture: session is closed", func(t *testing.T, b *cpu.Backend) error {
			s := open(t, b, spinPlan(t, 1, 1))
			require.NoError(t, s.Close())
			_, err := s.Capture(ctx)
			return err
		}},
		{"Launch of a closed graph", executor.ErrClosed, "the graph is closed", func(t *testing.T, b *cpu.Backend) error {
			s := open(t, b, spinPlan(t, 1, 1))
			g, err := s.Capture(ctx)
			require.NoError(t, err)
			require.NoError(t, g.Close())
			return g.Launch(ctx)
		}},
		{"Sync after Close", executor.ErrClosed, "Sync: session is closed", func(t *testing.T, b *cpu.Backend) error {
			s := open(t, b, spinPlan(t, 1, 1))
			require.NoError(t, s.Close())
			return s.Sync(ctx)
		}},
		{"a closed world", executor.ErrClosed, "the world is closed", func(t *testing.T, b *cpu.Backend) error {
			w, err := executor.OpenWorld(ctx, b, []*planner.Plan{spinPlan(t, 1, 1), spinPlan(t, 1, 1)})
			require.NoError(t, err)
			require.NoError(t, w.Close())
			return w.Run(ctx)
		}},
		{"Open on a closed backend", executor.ErrClosed, "the backend is closed", func(t *testing.T, b *cpu.Backend) error {
			require.NoError(t, b.Close())
			_, err := executor.Open(ctx, b, spinPlan(t, 1, 1))
			return err
		}},
		{"Read before Sync", executor.ErrBusy, "call Sync first", func(t *testing.T, b *cpu.Backend) error {
			p := spinPlan(t, 2, 20_000)
			s := open(t, b, p)
			require.NoError(t, s.Enqueue(ctx, executor.External{}))
			_, err := s.Read(p.Graph.Buffers[0])
			require.NoError(t, s.Sync(ctx))
			return err
		}},
		{"Write before Sync", executor.ErrBusy, "call Sync first", func(t *testing.T, b *cpu.Backend) error {
			p := spinPlan(t, 2, 20_000)
			s := open(t, b, p)
			require.NoError(t, s.Enqueue(ctx, executor.External{}))
			err := s.Write(p.Graph.Buffers[0], make([]byte, 16))
			require.NoError(t, s.Sync(ctx))
			return err
		}},
		{"Run beside a Run", executor.ErrBusy, "another call of the session", func(t *testing.T, b *cpu.Backend) error {
			s := open(t, b, spinPlan(t, 400, 10_000)) // 4 s unless closed
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			time.Sleep(30 * time.Millisecond)
			err := s.Run(ctx)
			require.NoError(t, s.Close())
			// The run in flight ends because the session closed under it.
			assert.ErrorIs(t, <-done, executor.ErrClosed)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cpu.New()
			defer b.Close()
			err := tt.do(t, b)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.text)
			for _, other := range []error{executor.ErrClosed, executor.ErrBusy} {
				if other != tt.want {
					assert.False(t, errors.Is(err, other), "%v also matches %v", err, other)
				}
			}
		})
	}
}

// The executor's names are package device's values, so a backend's error
// and the executor's match the same sentinel.
func TestSentinelsAreDevices(t *testing.T) {
	assert.Same(t, device.ErrClosed, executor.ErrClosed)
	assert.Same(t, device.ErrBusy, executor.ErrBusy)
	assert.Same(t, device.ErrNoDevice, executor.ErrNoDevice)
}

func open(t *testing.T, b *cpu.Backend, p *planner.Plan) *executor.Session {
	t.Helper()
	s, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}
