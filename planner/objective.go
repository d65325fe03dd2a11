package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/memory"
)

// Objective is what a plan is optimised for. It is the one place that
// decides among candidate plans (Objective.choose), when a plan is good
// enough that no other is worth making (enough), which stream budgets
// are worth trying (streamBudgets), which stream an op goes on among
// those of its pool (preferStream, openStream) and the tie rules of list
// scheduling (freesFirst), and which pair of temporaries a memory budget
// orders next (preferPair). The zero value is Makespan. The Optimize
// option sets it for a plan and the plans of its bodies.
type Objective uint8

const (
	// Makespan (the default) keeps the plan with the shortest estimated
	// makespan, the earlier candidate on a tie. For a replay it keeps,
	// among the plans within 1% of the shortest, the one with the fewest
	// streams: a replayed graph starts a device's concurrent branches
	// one after another (Overheads.ReplayBranch), and replays measured
	// faster with fewer branches than the model says
	// (BenchmarkReplayBranches, BenchmarkPipelineReplay).
	Makespan Objective = iota
	// LeastMemory keeps the plan that needs the least memory (the sum over
	// its memories of what a budget counts: persistent buffers and the
	// temporaries' arena, or for temporaries from a pool what the pool
	// holds at most), then the shortest makespan. It plans every ordering
	// on graphs of up to 16,384 ops.
	LeastMemory
	// FewestStreams keeps the plan with the fewest streams among those
	// within 1% of the shortest estimated makespan, for a run of either
	// mode: it tries halving the stream budget down to one stream.
	FewestStreams

	numObjectives // keep last
)

var objectiveNames = [numObjectives]string{Makespan: "makespan", LeastMemory: "memory", FewestStreams: "streams"}

func (o Objective) String() string {
	if o < numObjectives {
		return objectiveNames[o]
	}
	return fmt.Sprintf("Objective(%d)", uint8(o))
}

// Objectives lists every objective, in order.
func Objectives() []Objective { return []Objective{Makespan, LeastMemory, FewestStreams} }

// ParseObjective returns the objective named s ("makespan", "memory",
// "streams").
func ParseObjective(s string) (Objective, error) {
	for k, name := range objectiveNames {
		if name == s {
			return Objective(k), nil
		}
	}
	return 0, fmt.Errorf("unknown objective %q: use makespan, memory or streams", s)
}

// choose returns the candidate the objective prefers. groups holds the
// candidates per stream budget (Objective.streamBudgets), the given
// budget's first; each group's plans are of one graph under one mode, in
// the order they were made, none nil.
//
// Within a budget, the shortest makespan wins (under LeastMemory the
// least memory, then the shortest makespan), the earlier plan on a tie.
// Across budgets, under FewestStreams and for a replay, the fewest
// streams among the budgets' winners within 1% of the shortest of them
// wins, the smaller budget on a tie; otherwise the first budget's winner
// stands, as it is the only one.
func (o Objective) choose(mode Mode, pool bool, groups [][]*Plan) *Plan {
	winners := make([]*Plan, len(groups))
	for i, g := range groups {
		winners[i] = o.best(g, pool)
	}
	p := winners[0]
	if len(winners) == 1 {
		return p
	}
	shortest := p.Stats.Makespan
	for _, q := range winners[1:] {
		shortest = min(shortest, q.Stats.Makespan)
	}
	for _, q := range winners {
		if closeEnough(int64(q.Stats.Makespan), int64(shortest)) && q.Stats.Streams <= p.Stats.Streams {
			p = q
		}
	}
	return p
}

// best is the plan of cands with the shortest makespan (under
// LeastMemory: the least memory, then the shortest makespan), the
// earlier on a tie.
func (o Objective) best(cands []*Plan, pool bool) *Plan {
	best := cands[0]
	if o == LeastMemory {
		need := memoryNeed(best, pool)
		for _, p := range cands[1:] {
			if n := memoryNeed(p, pool); n < need || n == need && p.Stats.Makespan < best.Stats.Makespan {
				best, need = p, n
			}
		}
		return best
	}
	for _, p := range cands[1:] {
		if p.Stats.Makespan < best.Stats.Makespan {
			best = p
		}
	}
	return best
}

// enough says whether p, a plan with the first ordering, is good enough
// that no other ordering is worth planning: its makespan is within 1% of
// a lower bound (lowerBound, asked only when the critical path is not
// close enough), so no plan can be more than 1% shorter. Under
// LeastMemory no plan is enough: every ordering is planned.
func (o Objective) enough(p *Plan, bound func() int64) bool {
	if o == LeastMemory {
		return false
	}
	return closeEnough(int64(p.Stats.Makespan), int64(p.Stats.CriticalPath)) || closeEnough(int64(p.Stats.Makespan), bound())
}

// streamBudgets lists the stream budgets to plan with, the given one
// first: under FewestStreams, and for a replay under Makespan, also its
// halvings down to one stream, on graphs of up to maxTriedOps ops.
func (o Objective) streamBudgets(streams int, mode Mode, ops int) []int {
	out := []int{streams}
	if o == LeastMemory || o == Makespan && mode != Replay || ops > maxTriedOps {
		return out
	}
	for n := streams / 2; n >= 1; n /= 2 {
		out = append(out, n)
	}
	return out
}

// freesFirst says whether list scheduling, between ops that can start at
// the same time, places one that frees a temporary first: it costs next
// to nothing and lowers what the memory holds. For temporaries from a
// pool, which counts an allocation until its free is submitted, every
// objective does; with arenas none does, as an arena's bytes are reused
// by the order of the temporaries' uses, not of their frees.
func (o Objective) freesFirst(pool bool) bool { return pool }

// streamChoice is one stream an op could go on: when it could start there
// counting what its waits cost, the waits it needs there, and when the
// stream is free.
type streamChoice struct {
	start int64
	waits int
	free  int64
}

// preferStream says whether stream choice x is better than y for an op:
// under every objective the earlier start, then the fewer waits, then the
// stream busy longest (the smallest gap, leaving the others free).
func (o Objective) preferStream(x, y streamChoice) bool {
	return x.start < y.start || x.start == y.start && (x.waits < y.waits || x.waits == y.waits && x.free > y.free)
}

// openStream says whether an op goes on a new stream of its pool, where
// it could start at start, rather than on best, the best existing one
// (have is false when the pool has none yet): when it starts earlier
// there. FewestStreams asks the same here, as a stream that starts the op
// later would lengthen the plan; it trims streams by the budgets it tries.
func (o Objective) openStream(start int64, best streamChoice, have bool) bool {
	return !have || start < best.start
}

// preferPair says whether ordering a pair of temporaries whose uses lie
// gap ops apart (in op IDs) and which hold bytes between them is better,
// to meet a memory budget, than the pair found so far (bestGap ops apart,
// bestBytes): under LeastMemory the larger pair, which may lower the
// peak most, then the smaller gap; otherwise the smaller gap, which
// delays the least work, then the larger pair.
func (o Objective) preferPair(gap int32, bytes int64, bestGap int32, bestBytes int64) bool {
	if o == LeastMemory {
		return bytes > bestBytes || bytes == bestBytes && gap < bestGap
	}
	return gap < bestGap || gap == bestGap && bytes > bestBytes
}

// memoryNeed is the sum over p's memories of what a budget counts
// (budgetNeed).
func memoryNeed(p *Plan, pool bool) int64 {
	if p.Memory == nil {
		p.Memory = memory.Of(p)
	}
	var n int64
	for _, u := range p.Memory.Memories {
		n = dag.AddSat(n, budgetNeed(u, pool))
	}
	return n
}
