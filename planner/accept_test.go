package planner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

// The independent verifier accepts New's plans: the fixtures under several
// budgets, and random graphs of every kind.
func TestVerifyAcceptsPlans(t *testing.T) {
	for _, f := range dagtest.Fixtures() {
		for _, streams := range []int{1, 2, 8} {
			p := mustPlan(t, f.Graph, planner.Streams(streams))
			assert.NoError(t, verify.Verify(p), "%s, streams=%d", f.Name, streams)
		}
	}
	for seed := range int64(200) {
		cfg := dagtest.Config{Ops: 100, Buffers: 8, Seed: seed, Ranges: true, Priorities: seed%2 == 0,
			Temporaries: true, HostBuffers: true, Devices: 1 + int(seed)%2, After: true}
		p := mustPlan(t, dagtest.Random(cfg), plannertest.Options(planner.Options{Streams: 1 + int(seed)%32, SharedCopyStreams: seed%3 == 0})...)
		require.NoError(t, verify.Verify(p), "seed %d", seed)
	}
}
