package planner_test

import (
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

// FuzzPlanControl plans random graphs with loops and branches nested up to
// three deep (dagtest.RandomControl) under every strategy, mode and stream
// count, and checks that New and Verify never panic and that Verify passes
// New's plan, bodies included.
func FuzzPlanControl(f *testing.F) {
	f.Add(int64(1), uint8(10), uint8(2), uint8(3))
	f.Add(int64(2), uint8(40), uint8(3), uint8(1))
	f.Add(int64(3), uint8(1), uint8(0), uint8(8))
	f.Add(int64(-4), uint8(60), uint8(1), uint8(32))
	f.Fuzz(func(t *testing.T, seed int64, ops, depth, streams uint8) {
		c := dagtest.RandomControl(seed, int(ops%64), int(depth%4))
		opts := planner.Options{Streams: int(streams % 33),
			Strategy: planner.Strategies()[uint64(seed)>>1%3], Mode: planner.Mode(uint64(seed) >> 3 & 1)}
		p, err := planner.New(c.Graph, plannertest.Options(opts)...)
		if err != nil {
			t.Fatalf("seed %d, %d ops, depth %d, %+v: %v", seed, ops%64, depth%4, opts, err)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatalf("seed %d, %d ops, depth %d, %+v: New's plan fails Verify: %v", seed, ops%64, depth%4, opts, err)
		}
		if len(c.Graph.Nested) > 0 && len(p.Bodies) == 0 {
			t.Fatalf("seed %d: a graph with bodies planned none", seed)
		}
	})
}
