package planner_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// everyOp costs a millisecond: a cost model that shows in the makespan.
type everyOp struct{}

func (everyOp) Duration(*dag.Op) time.Duration { return time.Millisecond }

// TestOptions: each of New's options reaches the plan, later options
// override earlier ones, and a nil one is no option.
func TestOptions(t *testing.T) {
	g := build(t, fanOut(4))
	copies := build(t, func(b *dag.Builder) {
		h := b.Array("h", dag.F32, 16, dag.PinnedHost(), dag.Zeros())
		x := b.Array("x", dag.F32, 16)
		b.Copy(x.All(), h.All())
		b.Copy(h.All(), x.All())
	})
	computeStreams := func(p *planner.Plan) int {
		n := 0
		for _, s := range p.Streams {
			if s.Kind == planner.Compute {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name  string
		graph *dag.Graph
		opts  []planner.Option
		check func(t *testing.T, p *planner.Plan, err error)
	}{
		{"Streams", g, []planner.Option{planner.Streams(1)}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, 1, computeStreams(p))
		}},
		{"the last Streams counts", g, []planner.Option{planner.Streams(1), planner.Streams(4)}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, 4, computeStreams(p))
		}},
		{"a nil option", g, []planner.Option{nil, planner.Streams(1)}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, 1, computeStreams(p))
		}},
		{"a copy stream per direction by default", copies, nil, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Len(t, p.Streams, 2)
		}},
		{"SharedCopyStreams", copies, []planner.Option{planner.SharedCopyStreams()}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Len(t, p.Streams, 1)
		}},
		{"Cost", g, []planner.Option{planner.Streams(1), planner.Cost(perf.WithOverheads(everyOp{}, perf.Overheads{}))}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, 8*time.Millisecond, p.Stats.Makespan, "eight ops of a millisecond on one stream")
		}},
		{"OrderBy", g, []planner.Option{planner.OrderBy(planner.DeclarationOrder)}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, planner.DeclarationOrder, p.Stats.Strategy)
		}},
		{"ForMode", g, []planner.Option{planner.ForMode(planner.Replay)}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, planner.Replay, p.Stats.Mode)
		}},
		{"Optimize", g, []planner.Option{planner.Optimize(planner.FewestStreams), planner.Cost(perf.WithOverheads(everyOp{}, perf.Overheads{}))}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Less(t, computeStreams(p), 4, "equal branches gain nothing from a stream each under a flat cost")
		}},
		{"MemoryBudget", copies, []planner.Option{planner.MemoryBudget(0, 1)}, func(t *testing.T, p *planner.Plan, err error) {
			_, ok := errors.AsType[*planner.BudgetError](err)
			assert.True(t, ok, "a budget of one byte cannot be met: %v", err)
		}},
		{"Verify", g, []planner.Option{planner.Verify()}, func(t *testing.T, p *planner.Plan, err error) {
			require.NoError(t, err)
			assert.Equal(t, "verify", p.Passes[len(p.Passes)-1].Name)
		}},
		{"SMs out of range", g, []planner.Option{planner.SMs(-1)}, func(t *testing.T, p *planner.Plan, err error) {
			assert.ErrorContains(t, err, "multiprocessor count -1 is out of range")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planner.New(tt.graph, tt.opts...)
			tt.check(t, p, err)
		})
	}
}
