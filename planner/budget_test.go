package planner_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
)

// TestBudgetProperty plans the memory families with a budget of 1.5 times
// the smallest need the planner can reach (what a budget of one byte
// reports) on device 0: every plan stays within the budget and passes
// Verify. It logs the estimated makespan against the plan without a
// budget, per family.
func TestBudgetProperty(t *testing.T) {
	seeds := int64(6)
	if testing.Short() {
		seeds = 3
	}
	for _, fam := range dagtest.Families() {
		var ratioSum, peakSum, tightSum float64
		var n, constrained int
		for seed := range seeds {
			for _, streams := range []int{2, 4} {
				g := dagtest.Family(fam, 16, seed)
				free, err := planner.New(g, planner.Streams(streams))
				require.NoError(t, err)
				_, err = planner.New(g, planner.Streams(streams), planner.MemoryBudget(0, 1))
				var be *planner.BudgetError
				require.True(t, errors.As(err, &be), "%s/%d: %v", fam, seed, err)
				require.Equal(t, 0, be.Memory)
				require.NotEmpty(t, be.Live)
				require.Positive(t, be.Smallest)
				// At the smallest need itself the rounds take the path the
				// one-byte budget took, and stop where it found that need.
				tight, err := planner.New(g, planner.Streams(streams), planner.MemoryBudget(0, be.Smallest))
				require.NoError(t, err, "%s/%d streams %d: the smallest need", fam, seed, streams)
				require.NoError(t, verify.Verify(tight))
				tightSum += float64(tight.Stats.Makespan) / float64(free.Stats.Makespan)
				budget := be.Smallest * 3 / 2
				p, err := planner.New(g, planner.Streams(streams), planner.MemoryBudget(0, budget))
				require.NoError(t, err, "%s/%d streams %d", fam, seed, streams)
				require.NoError(t, verify.Verify(p), "%s/%d streams %d", fam, seed, streams)
				for _, u := range p.Memory.Memories {
					if u.Device == 0 {
						require.LessOrEqual(t, u.Bytes(), budget, "%s/%d streams %d", fam, seed, streams)
						var freeU plan.MemoryUse
						for _, fu := range free.Memory.Memories {
							if fu.Device == 0 {
								freeU = fu
							}
						}
						peakSum += float64(u.TemporaryPeak) / float64(freeU.TemporaryPeak)
					}
				}
				r := 1.0
				if p.Budget != nil {
					constrained++
					require.Equal(t, free.Stats.Makespan, p.Budget.Unconstrained)
					r = float64(p.Stats.Makespan) / float64(free.Stats.Makespan)
				}
				ratioSum += r
				n++
			}
		}
		t.Logf("%-9s budget 1.5x the smallest need: %d of %d plans reordered; estimated makespan %.3fx, temporaries peak %.3fx the plan without a budget (means); at the smallest need, makespan %.3fx",
			fam, constrained, n, ratioSum/float64(n), peakSum/float64(n), tightSum/float64(n))
	}
}

// TestBudgetOutOfReach: a budget below the largest temporary, which one op
// needs whole, is an error naming the smallest need found and what is live
// at its peak; a budget below the persistent buffers likewise; a budget of
// no bytes is refused.
func TestBudgetOutOfReach(t *testing.T) {
	g := dagtest.Family("chain", 8, 1)
	var largest int64
	for _, b := range g.Buffers {
		if b.Temporary {
			largest = max(largest, b.Size)
		}
	}
	free, err := planner.New(g)
	require.NoError(t, err)
	persistent := free.Memory.Memories[0].Persistent
	_, err = planner.New(g, planner.MemoryBudget(0, persistent+largest-1))
	var be *planner.BudgetError
	require.ErrorAs(t, err, &be)
	require.GreaterOrEqual(t, be.Peak, largest)
	require.Equal(t, be.Persistent+be.Peak <= be.Smallest, true)
	require.ErrorContains(t, err, "out of reach: the smallest need found is")
	require.ErrorContains(t, err, be.Live[0])

	_, err = planner.New(g, planner.MemoryBudget(0, persistent-1))
	require.ErrorAs(t, err, &be)

	_, err = planner.New(g, planner.MemoryBudget(0, 0))
	require.ErrorContains(t, err, "budget")

	// A budget the plan meets already changes nothing.
	p, err := planner.New(g, planner.MemoryBudget(0, free.Memory.Memories[0].Bytes()))
	require.NoError(t, err)
	require.Nil(t, p.Budget)
	require.Equal(t, free.Steps, p.Steps)
}

// TestPoolBudget: for temporaries from a pool, a budget bounds what the
// pool holds, the temporaries allocated at once in submission order; a
// budget of 1.5x the smallest need found is met on every family, and the
// plans verify.
func TestPoolBudget(t *testing.T) {
	met := 0
	for _, fam := range dagtest.Families() {
		for seed := range int64(3) {
			g := dagtest.Family(fam, 14+int(seed)*4, seed)
			for _, streams := range []int{2, 5} {
				_, err := planner.New(g, planner.Streams(streams), planner.PoolTemporaries(), planner.MemoryBudget(0, 1))
				var be *planner.BudgetError
				require.True(t, errors.As(err, &be), "%s seed %d: a 1-byte budget fails: %v", fam, seed, err)
				budget := be.Smallest * 3 / 2
				p, err := planner.New(g, planner.Streams(streams), planner.PoolTemporaries(), planner.MemoryBudget(0, budget))
				require.NoError(t, err, "%s seed %d streams %d, budget %d", fam, seed, streams, budget)
				require.NoError(t, verify.Verify(p))
				for _, u := range p.Memory.Memories {
					if u.Device == 0 {
						require.LessOrEqual(t, u.Persistent+u.SubmittedPeak, budget, "%s seed %d streams %d: the pool's hold", fam, seed, streams)
						met++
					}
				}
			}
		}
	}
	require.Equal(t, 4*3*2, met)
}

// A memory budget holds under every objective: the plan that meets it
// needs no more than the budget, and verifies. Under LeastMemory the
// budget orders the larger pairs first, so it is met with no more
// orderings than their count under Makespan would allow on these graphs.
func TestBudgetUnderEveryObjective(t *testing.T) {
	for _, fam := range dagtest.Families() {
		g := dagtest.Family(fam, 16, 1)
		_, err := planner.New(g, planner.Streams(4), planner.MemoryBudget(0, 1))
		var be *planner.BudgetError
		require.ErrorAs(t, err, &be, fam)
		budget := be.Smallest * 3 / 2
		for _, o := range planner.Objectives() {
			p, err := planner.New(g, planner.Streams(4), planner.Optimize(o), planner.MemoryBudget(0, budget))
			if errors.As(err, &be) {
				continue // this objective's pairs did not reach it: it says so
			}
			require.NoError(t, err, "%s under %s", fam, o)
			require.NoError(t, verify.Verify(p))
			for _, u := range p.Memory.Memories {
				if u.Device == 0 {
					assert.LessOrEqual(t, u.Bytes(), budget, "%s under %s", fam, o)
				}
			}
		}
	}
}
