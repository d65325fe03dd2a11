package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/memory"
	"github.com/dagrun/dagrun/planner/plan"
)

// Memory budgets: Options.MemoryBudget bounds what each memory may need
// (MemoryUse.Bytes: its persistent buffers and its arena). While a plan
// needs more, New orders two temporaries of the memory's peak that the
// plan leaves unordered, one whose uses all come before the other's in the
// graph's order (op IDs, a topological order, so the new dependencies make
// no cycle): every use of the first becomes a dependency of every use of
// the second, and the graph is planned again. Each round orders one more
// pair for good, so the rounds end; the plan that first fits wins. When no
// pair is left to order, or after maxBudgetRounds, the budget is out of
// reach: a BudgetError names the smallest need found and the temporaries
// live at its peak.

// maxBudgetRounds bounds the plans New makes to meet a budget.
const maxBudgetRounds = 512

// BudgetError says that no plan New found keeps a memory within its
// budget.
type BudgetError struct {
	Memory   int   // a device ordinal, PinnedMemory or PageableMemory
	Budget   int64 // Options.MemoryBudget's bytes for it
	Smallest int64 // the smallest need (persistent bytes and arena) of the plans tried
	// Persistent and Peak are that plan's persistent bytes and
	// temporaries' peak; Live names the temporaries live at the peak.
	Persistent, Peak int64
	Live             []string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("planner: the memory budget of %s for %s is out of reach: the smallest need found is %s (persistent %s, temporaries peak %s: %s)",
		dag.FormatBytes(e.Budget), plan.MemoryName(e.Memory), dag.FormatBytes(e.Smallest), dag.FormatBytes(e.Persistent), dag.FormatBytes(e.Peak), clip(e.Live, 8))
}

// budgetNeed is what memory u needs: its persistent buffers and the arena, or
// for temporaries from a pool (Options.PoolTemporaries) what the pool
// holds at most, the temporaries allocated at once in submission order.
func budgetNeed(u plan.MemoryUse, pool bool) int64 {
	if pool {
		return dag.AddSat(u.Persistent, u.SubmittedPeak)
	}
	return u.Bytes()
}

// overBudget returns the first memory of p (by Device) whose need exceeds
// its budget, if any.
func overBudget(p *Plan, budget map[int]int64, pool bool) (plan.MemoryUse, bool) {
	for _, u := range p.Memory.Memories {
		if b, ok := budget[u.Device]; ok && budgetNeed(u, pool) > b {
			return u, true
		}
	}
	return plan.MemoryUse{}, false
}

// usesOf lists each temporary's uses in g (by buffer ID): the ops other
// than its Alloc and Free that access it, or those where nothing else does.
func usesOf(g *dag.Graph) map[int][]int32 {
	uses, lifetime := map[int][]int32{}, map[int][]int32{}
	for _, op := range g.Ops {
		for j, a := range op.Access {
			b := a.Buf
			if b == nil || !b.Temporary || slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == b }) {
				continue
			}
			if op.Kind.Info().Lifetime != dag.NoLifetime {
				lifetime[b.ID] = append(lifetime[b.ID], int32(op.ID))
			} else {
				uses[b.ID] = append(uses[b.ID], int32(op.ID))
			}
		}
	}
	for id, ops := range lifetime {
		if len(uses[id]) == 0 {
			uses[id] = ops
		}
	}
	return uses
}

// lifetimeOps lists the ops of g that allocate (or free) temporary buf.
func lifetimeOps(g *dag.Graph, buf int, l dag.Lifetime) []int32 {
	var out []int32
	for _, op := range g.Ops {
		if op.Kind.Info().Lifetime == l && len(op.Access) > 0 && op.Access[0].Buf != nil && op.Access[0].Buf.ID == buf {
			out = append(out, int32(op.ID))
		}
	}
	return out
}

// withBudget replans s.Graph until p, its plan without a budget, meets
// s.Options.MemoryBudget: each plan is one more search of the candidate
// passes, under the same objective.
func withBudget(s *State, p *Plan) (*Plan, error) {
	g, opts := s.Graph, s.Options
	pool := opts.PoolTemporaries
	u, over := overBudget(p, opts.MemoryBudget, pool)
	if !over {
		return p, nil
	}
	uses := usesOf(g)
	bodies := p.Bodies
	extra := map[int32][]int32{} // by op: the dependencies added
	ordered := map[[2]int]bool{} // pairs of temporaries (first, second) ordered
	unconstrained, bestUse := p.Stats.Makespan, u
	pairs := 0
	for range maxBudgetRounds {
		if pool { // the pool's peak: the temporaries allocated at its step
			u.Peak = submittedLive(p, u.Device)
		}
		a, b, ok := pairToOrder(opts.Objective, p, u, uses, ordered)
		if !ok {
			break
		}
		ordered[[2]int{a, b}] = true
		pairs++
		for _, v := range uses[b] {
			for _, w := range uses[a] {
				if !slices.Contains(extra[v], w) && !slices.Contains(g.Ops[v].Deps, w) {
					extra[v] = append(extra[v], w)
				}
			}
		}
		if pool {
			// A pool gives a's bytes to b only once a's free is done: b's
			// alloc waits for it, else it may run first, on another
			// stream, and the pool holds both.
			for _, v := range lifetimeOps(g, b, dag.Allocates) {
				for _, w := range lifetimeOps(g, a, dag.Frees) {
					if !slices.Contains(extra[v], w) && !slices.Contains(g.Ops[v].Deps, w) {
						extra[v] = append(extra[v], w)
					}
				}
			}
		}
		if err := s.planGraph(withDeps(g, extra)); err != nil {
			return nil, err
		}
		p = s.Plan
		p.Graph, p.Bodies = g, bodies
		p.Memory = memory.Of(p)
		if u, over = overBudget(p, opts.MemoryBudget, pool); !over {
			deps := 0
			for _, ws := range extra {
				deps += len(ws)
			}
			p.Budget = &plan.Budget{Orderings: pairs, Dependencies: deps, Unconstrained: unconstrained}
			return p, nil
		}
		if u.Device == bestUse.Device && budgetNeed(u, pool) < budgetNeed(bestUse, pool) {
			bestUse = u
		}
	}
	if u.Device != bestUse.Device { // the memory that failed last is the one to name
		bestUse = u
	}
	e := &BudgetError{Memory: bestUse.Device, Budget: opts.MemoryBudget[bestUse.Device], Smallest: budgetNeed(bestUse, pool),
		Persistent: bestUse.Persistent, Peak: bestUse.TemporaryPeak}
	live := bestUse.Peak
	if pool {
		e.Peak, live = bestUse.SubmittedPeak, submittedLive(p, bestUse.Device)
	}
	for _, id := range live {
		e.Live = append(e.Live, p.Graph.Buffers[id].Name)
	}
	return nil, e
}

// pairToOrder picks two temporaries of u's peak to order, a before b: every
// use of a comes before every use of b in op IDs, and the pair is not
// ordered yet. The objective prefers one pair to another by the room
// between a's last use and b's first and by their bytes (preferPair).
func pairToOrder(o Objective, p *Plan, u plan.MemoryUse, uses map[int][]int32, ordered map[[2]int]bool) (a, b int, ok bool) {
	bytes := func(id int) int64 { return p.Graph.Buffers[id].Size }
	gap := int32(-1)
	var weight int64
	for _, x := range u.Peak {
		if len(uses[x]) == 0 {
			continue
		}
		last := slices.Max(uses[x])
		for _, y := range u.Peak {
			if x == y || len(uses[y]) == 0 || ordered[[2]int{x, y}] {
				continue
			}
			first := slices.Min(uses[y])
			if first <= last {
				continue
			}
			w := bytes(x) + bytes(y)
			if g := first - last; gap < 0 || o.preferPair(g, w, gap, weight) {
				a, b, ok, gap, weight = x, y, true, g, w
			}
		}
	}
	return a, b, ok
}

// submittedLive lists the temporaries of memory mem allocated and not yet
// freed at the step where p's steps first hold MemoryUse.SubmittedPeak
// (buffer IDs, ascending): one pass finds the step, a second replays the
// steps up to it.
func submittedLive(p *Plan, mem int) []int {
	if p.Memory == nil {
		return nil
	}
	var held, most int64
	peakAt, n := -1, 0
	memory.LifetimeSteps(p, p.Memory.Temporaries, func(t *plan.Temporary, allocates bool) bool {
		if t.Device != mem {
			return true
		}
		if allocates {
			held = dag.AddSat(held, t.Bytes)
		} else {
			held -= t.Bytes
		}
		if held > most {
			most, peakAt = held, n
		}
		n++
		return true
	})
	live := map[int]bool{}
	n = 0
	memory.LifetimeSteps(p, p.Memory.Temporaries, func(t *plan.Temporary, allocates bool) bool {
		if t.Device != mem {
			return true
		}
		if n > peakAt {
			return false
		}
		if allocates {
			live[t.Buffer] = true
		} else {
			delete(live, t.Buffer)
		}
		n++
		return true
	})
	out := make([]int, 0, len(live))
	for id := range live {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// withDeps is g with the dependencies extra added to its ops: a copy of
// the ops that gain some, sharing everything else.
func withDeps(g *dag.Graph, extra map[int32][]int32) *dag.Graph {
	out := *g
	out.Ops = slices.Clone(g.Ops)
	for v, ws := range extra {
		op := *g.Ops[v]
		op.Deps = append(slices.Clone(op.Deps), ws...)
		slices.Sort(op.Deps)
		out.Ops[v] = &op
	}
	return &out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clip joins names, the first n of them and how many more.
func clip(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}
