package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/dagrun/dagrun/cpu" // registers the cpu backend
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Run opens a backend, plans, runs, and closes the backend whatever
// happens: afterwards the backend it opened refuses to open a session.
func TestRunClosesTheBackend(t *testing.T) {
	ctx := context.Background()
	g := scaleGraph(t)
	tests := []struct {
		name    string
		opts    []executor.Option
		wantErr error
	}{
		{"auto", nil, nil},
		{"cpu by name", []executor.Option{executor.WithBackend("cpu")}, nil},
		{"planner options", []executor.Option{executor.WithBackend("cpu"), executor.WithPlan(planner.Streams(1), planner.Optimize(planner.FewestStreams))}, nil},
		{"a failing op", []executor.Option{executor.WithFailOp("triple")}, executor.ErrInjected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opened device.Opened
			opts := append(tt.opts, executor.WithOpened(func(o device.Opened) { opened = o }))
			out, err := executor.Run(ctx, g, opts...)
			require.NotNil(t, opened.Backend)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var oe *dag.OpError
				require.True(t, errors.As(err, &oe), "%v", err)
				assert.Equal(t, "triple", oe.Op)
			} else {
				require.NoError(t, err)
				assert.Equal(t, []float32{3, 3, 3, 3}, out.Float32s(g.Buffers[0]))
			}
			p, perr := planner.New(g)
			require.NoError(t, perr)
			_, err = executor.Open(ctx, opened.Backend, p)
			assert.ErrorIs(t, err, executor.ErrClosed, "the backend Run opened is still open")
		})
	}
}

// WithPlan's options reach the planner: a stream budget it refuses is
// Run's error.
func TestRunPlansWithItsOptions(t *testing.T) {
	_, err := executor.Run(context.Background(), scaleGraph(t), executor.WithBackend("cpu"), executor.WithPlan(planner.Streams(planner.MaxStreams+1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stream budget 33 is out of range")
}

// A backend name nobody registered is an error before anything opens.
func TestRunUnknownBackend(t *testing.T) {
	_, err := executor.Run(context.Background(), scaleGraph(t), executor.WithBackend("tpu"))
	require.ErrorIs(t, err, device.ErrUnknownBackend)
	assert.Contains(t, err.Error(), "tpu")
}

// scaleGraph is x (4 f32 of 1) tripled by an op called triple.
func scaleGraph(t *testing.T) *dag.Graph {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 16, dag.Value(1))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(4), x, 3.0, dag.Name("triple"))
	g, err := b.Build()
	require.NoError(t, err)
	return g
}
