package executor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A memory the backend measured shows its figure and how it was measured;
// one it did not, while it measures others (on CUDA: host memories, or the
// pool where only replays ran), says so without blaming the backend; a
// backend that measures nothing is named. In a pool (not arenas), what the
// steps allocate at once in submission order is shown where it differs
// from the peak: the pool's own figure.
func TestMemoryReportString(t *testing.T) {
	n := int64(3 << 20)
	for _, tc := range []struct {
		r    MemoryReport
		want string
	}{
		{MemoryReport{Memory: "device 0", PlannedPeakBytes: 2 << 20, PlannedArenaBytes: 2 << 20, PlannedSubmittedBytes: 3 << 20, MeasuredPeakBytes: &n, measures: true},
			"memory device 0: temporaries planned peak 2.0 MiB, arena 2.0 MiB, 3.0 MiB allocated at once in step order; measured 3.0 MiB (at most live at once)"},
		{MemoryReport{Memory: "pinned host memory", PlannedPeakBytes: 4096, PlannedArenaBytes: 4096, PlannedSubmittedBytes: 4096, measures: true},
			"memory pinned host memory: temporaries planned peak 4.0 KiB, arena 4.0 KiB; measured not measured"},
		{MemoryReport{Memory: "device 1", PlannedPeakBytes: 1024, PlannedArenaBytes: 1024, PlannedSubmittedBytes: 1024, Arena: true},
			"memory device 1: temporaries planned peak 1.0 KiB, arena 1.0 KiB; measured not measured by this backend"},
	} {
		assert.Equal(t, tc.want, tc.r.String())
	}
}

// A pool that held more than the plan counts is a warning naming both
// figures; persistent buffers and the measured temporaries over the
// memory's budget are an error naming the budget; an arena, or a pool
// within the plan and budget, is neither.
func TestMemoryOverPlanAndBudget(t *testing.T) {
	mib := func(n int64) *int64 { n <<= 20; return &n }
	for _, tc := range []struct {
		name          string
		r             MemoryReport
		warning, fail string
	}{
		{"pool within the plan", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, MeasuredPeakBytes: mib(1), persistent: 16, budget: 2 << 20}, "", ""},
		{"pool over the plan, within the budget", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, MeasuredPeakBytes: mib(2), budget: 8 << 20},
			"the pool held 2.0 MiB of temporaries at once, more than the 1.0 MiB the plan counts", ""},
		{"pool over the plan and the budget", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, MeasuredPeakBytes: mib(2), persistent: 16, budget: 2 << 20},
			"more than the 1.0 MiB the plan counts", "memory device 0: the run held 2.0 MiB of temporaries beside 16 B of persistent buffers, over the memory budget of 2.0 MiB"},
		{"no budget", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, MeasuredPeakBytes: mib(3)}, "more than", ""},
		{"arena", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, MeasuredPeakBytes: mib(1), Arena: true, budget: 2 << 20}, "", ""},
		{"not measured", MemoryReport{Memory: "device 0", PlannedPeakBytes: 1 << 20, PlannedSubmittedBytes: 1 << 20, budget: 1}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.warning == "" {
				assert.Empty(t, tc.r.overPlan())
			} else {
				assert.Contains(t, tc.r.overPlan(), tc.warning)
			}
			if err := tc.r.OverBudget(); tc.fail == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.fail)
			}
		})
	}
}
