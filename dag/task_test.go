package dag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func noTask(context.Context, dag.TaskStream) error { return nil }

func TestTaskBuild(t *testing.T) {
	tests := []struct {
		name    string
		declare func(b *dag.Builder)
		wantErr string // "" for a graph that builds
	}{
		{
			name: "device views, runs on the CPU too",
			declare: func(b *dag.Builder) {
				x := b.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
				y := b.Buffer("y", 64, dag.OnDevice(0), dag.Zeros())
				b.Task(noTask, dag.In(x.All()), dag.Out(y.All()), dag.Name("t"), dag.RunsOnCPU())
			},
		},
		{
			name: "pinned host view",
			declare: func(b *dag.Builder) {
				x := b.Buffer("x", 64, dag.PinnedHost(), dag.Zeros())
				b.Task(noTask, dag.InOut(x.All()), dag.Name("t"))
			},
		},
		{
			name: "no function",
			declare: func(b *dag.Builder) {
				x := b.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
				b.Task(nil, dag.Out(x.All()), dag.Name("t"))
			},
			wantErr: `op "t": stream task has no function`,
		},
		{
			name: "pageable view",
			declare: func(b *dag.Builder) {
				x := b.Buffer("x", 64, dag.PageableHost(), dag.Zeros())
				b.Task(noTask, dag.Out(x.All()), dag.Name("t"))
			},
			wantErr: "pageable host buffer x",
		},
		{
			name: "RunsOnCPU on another kind",
			declare: func(b *dag.Builder) {
				x := b.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
				b.Fill(x.All(), 1, dag.Name("f"), dag.RunsOnCPU())
			},
			wantErr: `op "f": option RunsOnCPU does not apply to fill ops (it is an option of task ops)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.declare(b)
			g, err := b.Build()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			op := g.Ops[len(g.Ops)-1]
			assert.Equal(t, dag.Task, op.Kind)
			assert.Equal(t, "t", op.Name)
			require.NotNil(t, op.Task)
			assert.NotNil(t, op.Task.Func)
		})
	}
}

// A task is ordered with other ops by the views it declares.
func TestTaskDependencies(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
	y := b.Buffer("y", 64, dag.OnDevice(0), dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("fill"))
	b.Task(noTask, dag.In(x.All()), dag.Out(y.All()), dag.Name("t"))
	b.Fill(x.All(), 2, dag.Name("refill"))
	g, err := b.Build()
	require.NoError(t, err)
	byName := map[string]*dag.Op{}
	for _, op := range g.Ops {
		byName[op.Name] = op
	}
	assert.Equal(t, []int32{int32(byName["fill"].ID)}, byName["t"].Deps, "read after write")
	assert.Contains(t, byName["refill"].Deps, int32(byName["t"].ID), "write after read")
	assert.Equal(t, dag.ComputeClass, dag.Task.Info().Class)
}
