package plannertest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/plan"
)

// peers is a topology in which every device reaches every other.
type peers struct{}

func (peers) PeerAccess(from, to int) bool { return true }

// TestOptionsRoundTrip: the options Options makes set every field of the
// settings it was given, so that a test's table means what it says.
func TestOptionsRoundTrip(t *testing.T) {
	want := planner.Options{
		Streams: 3, SharedCopyStreams: true, Cost: perf.DefaultCost(), Strategy: planner.DeclarationOrder,
		Mode: planner.Replay, Topology: peers{}, SMs: 7, MemoryBudget: map[int]int64{0: 1 << 20, plan.PinnedMemory: 4096},
		PoolTemporaries: true, Objective: planner.LeastMemory, Rewrites: []planner.Pass{nil}, Verify: true,
	}
	var got planner.Options
	for _, o := range plannertest.Options(want) {
		o(&got)
	}
	assert.Equal(t, want, got)
}
