package memory_test

import (
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/memory"
	"github.com/dagrun/dagrun/planner/verify"
)

// BenchmarkPlanTemporaries plans a generated graph of 100,000 ops with
// 20,000 temporaries (dagtest's pipeline family, default options) as dagrun
// plan does, planner.New with its verify pass, with memory planning on (the
// temporaries' lives, their peak, the packing of the arena, and Verify's
// check of it) and off (the same plan without Plan.Memory, which Verify then
// skips): the plan's placement is made once, outside the loop, so the
// difference of the two is what memory planning costs.
func BenchmarkPlanTemporaries(b *testing.B) {
	g := dagtest.Family("pipeline", 20000, 1)
	p, err := planner.New(g)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		memory bool
	}{{"memory=off", false}, {"memory=on", true}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				p.Memory = nil
				if bc.memory {
					p.Memory = memory.Of(p)
				}
				if err := verify.Verify(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(g.Ops)), "ops")
		})
	}
}
