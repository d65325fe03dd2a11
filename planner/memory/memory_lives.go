package memory

// The temporaries' lifetimes in the plan's happens-before order, and
// which pairs of them the plan leaves unordered (MemoryOf's first steps).

import (
	"math"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// lifeSet is the temporaries of a plan, where their uses are in the
// plan's happens-before order, and the events of its replay. The lives
// are numbered in the order the ops first name them; their fields are
// arrays by life, which hold no pointers and keep each field of the lives
// together.
type lifeSet struct {
	temps []plan.Temporary // each life's temporary
	// vecs holds the lives' vectors, last then first, ns each: life x's
	// are vecs[2*x*ns:(2*x+2)*ns]. last[s] is the place among stream s's
	// runs (from 1) of the last use on s, 0 for none; first[s] is the
	// fewest runs of stream s that every use is ordered after (a vector
	// clock meet over the uses, each clock taken just before the use
	// runs).
	vecs []int32
	ns   int
	// on[x*ns:x*ns+onLen[x]] are the streams s with last[s] > 0.
	on, onLen  []int32
	firstUse   []int32 // the use submitted first, -1 for none
	start, end []int32 // the steps of the first and last use, for orderings; start -1 for none
	log        []lifeEvent
	// The memories of the lives, in the order they first come (devs), each
	// life's (memory, in devs), and each memory's SubmittedPeak.
	devs      []int
	memory    []int32
	submitted []int64
}

// last and first are life x's vectors.
func (set *lifeSet) last(x int32) []int32 {
	ns := set.ns
	return set.vecs[2*int(x)*ns : (2*int(x)+1)*ns : (2*int(x)+1)*ns]
}

func (set *lifeSet) first(x int32) []int32 {
	ns := set.ns
	return set.vecs[(2*int(x)+1)*ns : (2*int(x)+2)*ns : (2*int(x)+2)*ns]
}

// before reports whether the plan orders every use of life x before every
// use of life y.
func (set *lifeSet) before(x, y int32) bool {
	last, first := set.last(x), set.first(y)
	for _, s := range set.on[int(x)*set.ns : int(x)*set.ns+int(set.onLen[x])] {
		if last[s] > first[s] {
			return false
		}
	}
	return true
}

// lifeEvent is a temporary's first use (start) or its retirement, in the
// order collect met them. Once retired, a temporary is ordered before every
// temporary that starts after it; the retirements between two starts form
// one batch.
type lifeEvent struct {
	life   int32
	retire bool
}

// collect replays p's steps with a vector clock per stream and finds each
// temporary's uses: the ops that access it other than its Alloc and Free,
// or those two where nothing else does (in an arena they are the only ops
// that name it, and do nothing). On the way it retires the temporaries
// whose uses are all over and that every stream still to use a temporary
// has waited for: the meet of those streams' clocks (the frontier) is past
// their last uses, so the plan orders them before every later use; and it
// counts each memory's temporaries allocated and not yet freed, for
// MemoryUse.SubmittedPeak.
func collect(p *plan.Plan) *lifeSet {
	temps := 0
	for _, b := range p.Graph.Buffers {
		if b != nil && b.Temporary {
			temps++
		}
	}
	return collectOf(p, temps)
}

// collectOf is collect of a plan whose graph has temps temporaries.
func collectOf(p *plan.Plan, temps int) *lifeSet {
	g := p.Graph
	ns := len(p.Streams)
	set := &lifeSet{ns: ns}
	byBuf := make([]int32, len(g.Buffers))
	for i := range byBuf {
		byBuf[i] = -1
	}
	set.temps = make([]plan.Temporary, 0, temps)
	// Each op's accesses of temporaries (once each), and whether the op is
	// an Alloc or Free or not (plain), in one pass over the ops; used says
	// which lives a plain op names.
	accesses := make([]int32, 0, len(g.Ops)+temps) // about one an op in graphs of temporaries
	accessStart := make([]int32, len(g.Ops)+1)
	plainOp := make([]bool, len(g.Ops))
	used := make([]bool, 0, temps)
	// Each kind's lifetime (kinds are uint8s), at hand.
	// Those of the kinds that are not valid are NoLifetime, the zero value.
	var lifetimes [256]dag.Lifetime
	for k := dag.OpKind(0); k.Valid(); k++ {
		lifetimes[k] = k.Info().Lifetime
	}
	for i, op := range g.Ops {
		accessStart[i] = int32(len(accesses))
		if op == nil {
			continue
		}
		lifetime := lifetimes[op.Kind]
		plainOp[i] = lifetime == dag.NoLifetime
		for j, a := range op.Access {
			if b := a.Buf; b != nil && b.Temporary && b.ID >= 0 && b.ID < len(g.Buffers) {
				x := byBuf[b.ID]
				if x < 0 {
					x = int32(len(set.temps))
					byBuf[b.ID] = x
					set.temps = append(set.temps, plan.Temporary{Buffer: b.ID, Device: plan.BufferMemory(b), Bytes: roundUp(b.Size), Alloc: -1, Free: -1})
					used = append(used, false)
				}
				switch lifetime {
				case dag.Allocates:
					set.temps[x].Alloc = int32(op.ID)
				case dag.Frees:
					set.temps[x].Free = int32(op.ID)
				default:
					used[x] = true
				}
				if !slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == b }) {
					accesses = append(accesses, x)
				}
			}
		}
	}
	accessStart[len(g.Ops)] = int32(len(accesses))
	n := len(set.temps)
	if n == 0 {
		return set
	}
	// The memories: a plan has a few, so a short list beats a map.
	set.memory = make([]int32, n)
	k := -1
	for x, t := range set.temps {
		if k < 0 || set.devs[k] != t.Device {
			if k = slices.Index(set.devs, t.Device); k < 0 {
				k = len(set.devs)
				set.devs = append(set.devs, t.Device)
			}
		}
		set.memory[x] = int32(k)
	}
	held, submitted := make([]int64, len(set.devs)), make([]int64, len(set.devs))
	set.submitted = submitted
	lifetime := lifetimeMarks(len(g.Ops), set.temps)
	// usesOf lists the temporaries an op's run uses (once each): those it
	// names, if plain, and those only Allocs and Frees name, if not. The
	// accesses are filtered in place, op by op.
	opStart := accessStart
	kept := int32(0)
	for i := range g.Ops {
		from, to := accessStart[i], accessStart[i+1]
		opStart[i] = kept
		for _, x := range accesses[from:to] {
			if used[x] == plainOp[i] {
				accesses[kept] = x
				kept++
			}
		}
	}
	opStart[len(g.Ops)] = kept
	opUses := accesses[:kept]
	usesOf := func(op int32) []int32 { return opUses[opStart[op]:opStart[op+1]] }
	// The lives' fields.
	vecs := make([]int32, 2*ns*n)
	set.vecs = vecs
	for x := range n {
		first := vecs[(2*x+1)*ns : (2*x+2)*ns]
		for s := range first {
			first[s] = math.MaxInt32
		}
	}
	set.on, set.onLen = make([]int32, ns*n), make([]int32, n)
	set.firstUse, set.start, set.end = make([]int32, n), make([]int32, n), make([]int32, n)
	for x := range n {
		set.firstUse[x], set.start[x] = -1, -1
	}
	set.log = make([]lifeEvent, 0, 2*n) // a start and a retirement each
	// What is left to replay: each life's using steps, each stream's steps
	// that use a temporary.
	left := make([]int32, n)
	remaining := make([]int32, ns)
	valid := func(st plan.Step) bool {
		return st.Kind == plan.Run && st.Stream >= 0 && int(st.Stream) < ns && st.Op >= 0 && int(st.Op) < len(g.Ops)
	}
	for _, st := range p.Steps {
		if valid(st) {
			if us := usesOf(st.Op); len(us) > 0 {
				remaining[st.Stream]++
				for _, x := range us {
					left[x]++
				}
			}
		}
	}
	clock := make([]int32, ns*ns)
	// events[e*ns+t]: event e's clock when recorded, zeros (ordering
	// nothing) until it is.
	events := make([]int32, max(p.Events, 0)*ns)
	r := &retirer{frontier: make([]int32, ns), seen: make([]int32, ns)}
	for i, st := range p.Steps {
		if st.Kind == plan.Run && st.Op >= 0 && int(st.Op) < len(lifetime) {
			if y := lifetime[st.Op]; y != 0 { // as lifetimeSteps has it
				x := max(y, -y) - 1
				k, b := set.memory[x], set.temps[x].Bytes
				if y > 0 {
					held[k] = dag.AddSat(held[k], b)
					submitted[k] = max(submitted[k], held[k])
				} else {
					held[k] -= b
				}
			}
		}
		s := int(st.Stream)
		if s < 0 || s >= ns {
			continue
		}
		mine := clock[s*ns : (s+1)*ns]
		switch st.Kind {
		case plan.Record:
			if st.Event >= 0 && int(st.Event) < p.Events {
				copy(events[int(st.Event)*ns:], mine)
			}
		case plan.Wait:
			if st.Event >= 0 && int(st.Event) < p.Events {
				for t, c := range events[int(st.Event)*ns : (int(st.Event)+1)*ns] {
					mine[t] = max(mine[t], c)
				}
			}
		case plan.Run:
			if !valid(st) {
				continue
			}
			us := usesOf(st.Op)
			if len(us) == 0 {
				mine[s]++
				continue
			}
			if len(r.pending) > r.checked && slices.ContainsFunc(us, func(x int32) bool { return set.start[x] < 0 }) {
				r.retire(set, clock, remaining)
			}
			for _, x := range us {
				last, first := set.last(x), set.first(x)
				for t, c := range mine {
					first[t] = min(first[t], c)
				}
				if last[s] == 0 {
					set.on[int(x)*ns+int(set.onLen[x])] = int32(s)
					set.onLen[x]++
				}
				last[s] = mine[s] + 1
				if set.start[x] < 0 {
					set.start[x], set.firstUse[x] = int32(i), st.Op
					set.log = append(set.log, lifeEvent{life: x})
				}
				set.end[x] = int32(i)
				if left[x]--; left[x] == 0 {
					r.pending = append(r.pending, pending{life: x, stream: -1})
				}
			}
			remaining[s]--
			mine[s]++
		}
	}
	return set
}

// retirer retires the temporaries whose uses are over once the frontier
// passes them: it looks before each temporary's first use that follows the
// end of another's uses.
type retirer struct {
	pending []pending // lives whose uses are over, not retired yet
	// pending[:checked] did not pass seen, the frontier of the last look;
	// the frontier only grows, so they need a look only once it does.
	checked        int
	frontier, seen []int32
}

// pending is a life whose uses are over, and the stream on which the
// frontier last fell short of its last use (-1 before a look), with that
// use's place: until the frontier passes it there, the life waits, and a
// look at that one stream says so.
type pending struct {
	life, stream, last int32
}

// retire logs the lives of pending that the frontier (the meet of the
// clocks of the streams with temporaries still to use) has passed, and
// keeps the others.
func (r *retirer) retire(set *lifeSet, clock, remaining []int32) {
	ns := len(remaining)
	have := false
	frontier := r.frontier
	for t := range ns {
		if remaining[t] == 0 {
			continue
		}
		row := clock[t*ns : (t+1)*ns]
		if !have {
			copy(frontier, row)
			have = true
			continue
		}
		for k, c := range row {
			frontier[k] = min(frontier[k], c)
		}
	}
	if !have {
		return
	}
	from := 0
	if slices.Equal(frontier, r.seen) {
		from = r.checked
	}
	copy(r.seen, frontier)
	kept := r.pending[:from]
	for _, q := range r.pending[from:] {
		if q.stream >= 0 && q.last > frontier[q.stream] {
			kept = append(kept, q)
			continue
		}
		x := q.life
		last := set.last(x)
		passed := true
		for _, s := range set.on[int(x)*ns : int(x)*ns+int(set.onLen[x])] {
			if last[s] > frontier[s] {
				q.stream, q.last, passed = s, last[s], false
				break
			}
		}
		if passed {
			set.log = append(set.log, lifeEvent{life: x, retire: true})
		} else {
			kept = append(kept, q)
		}
	}
	r.pending, r.checked = kept, len(kept)
}

// lifeOrder is the temporaries of one memory and how the plan orders
// them: the pairs it leaves unordered (conflicts), and a DAG whose paths
// join exactly the ordered pairs: direct arcs between ordered pairs that
// both lived at once in the replay, and for the rest, chains through
// barriers (one per batch of retirements).
type lifeOrder struct {
	set     *lifeSet
	members []int32 // the lives, of set
	bytes   []int64 // their temporaries' bytes
	// The conflicts, once gatherConflicts has gathered them from earlier,
	// the conflicts of the life of rank r with lives started before it (by
	// rank): earlier[earlierEnd[r-1]:earlierEnd[r]], in the order found,
	// degree[r] of them in all. The packer needs them, the peak does not:
	// on a big memory they are gathered beside the peak.
	conflicts                   adjacency
	earlier, earlierEnd, degree []int32
	byStart                     []int32 // the lives with uses, in the order they started in the replay
	// The direct arcs, by the later life: byStart[k]'s are from each
	// byStart[r] for r of direct[directEnd[k-1]:directEnd[k]] (before it,
	// both unretired when it started). Those implied by two others are
	// left out.
	direct, directEnd []int32
	retiredAt         []int32 // the barrier each life retired into, -1 for none
	startsAt          []int32 // the last barrier before each life started, -1 for none
	barriers          int
}

// adjacency lists, for each of n nodes, its neighbours: node i's are
// to[start[i]:start[i+1]].
type adjacency struct {
	start, to []int32
}

func (a *adjacency) of(i int) []int32 { return a.to[a.start[i]:a.start[i+1]] }

// order gathers the lifeOrder of the lives members (of one memory) of
// set.
func (set *lifeSet) order(members []int32) *lifeOrder {
	n := len(members)
	o := &lifeOrder{set: set, members: members, bytes: make([]int64, n), retiredAt: make([]int32, n), startsAt: make([]int32, n),
		byStart: make([]int32, 0, n), directEnd: make([]int32, 0, n)}
	local := make([]int32, len(set.temps)) // by life of set, its place in o, -1 for none
	for i := range local {
		local[i] = -1
	}
	for i, x := range members {
		o.bytes[i] = set.temps[x].Bytes
		local[x] = int32(i)
		o.retiredAt[i], o.startsAt[i] = -1, -1
	}
	// The work goes by rank, the place in the order the lives started:
	// the lives alive at once are near each other there.
	for _, ev := range set.log {
		if m := local[ev.life]; m >= 0 && !ev.retire {
			o.byStart = append(o.byStart, m)
		}
	}
	rank := make([]int32, n)
	for r, m := range o.byStart {
		rank[m] = int32(r)
	}
	// The vectors by rank, last then first: a is before m when a's last
	// run on every stream (0 for none) is within m's first.
	ns := set.ns
	vecs := make([]int32, 2*ns*len(o.byStart))
	for r, m := range o.byStart {
		x := members[m]
		copy(vecs[2*r*ns:(2*r+2)*ns], set.vecs[2*int(x)*ns:(2*int(x)+2)*ns])
	}
	before := func(a, m int32) bool {
		last, first := vecs[2*int(a)*ns:(2*int(a)+1)*ns], vecs[(2*int(m)+1)*ns:(2*int(m)+2)*ns]
		first = first[:len(last)]
		var under int32 // negative when a run is not within m's first (both in [0, MaxInt32]), without branches
		for s, c := range last {
			under |= first[s] - c
		}
		return under >= 0
	}
	var active []int32 // by rank
	var earlier []int32
	earlierEnd := make([]int32, 0, n)
	degree := make([]int32, len(o.byStart))
	dead := 0
	// mark is -1 for the retired lives, r+1 for those with a direct arc
	// to one with a direct arc to r.
	mark := make([]int32, len(o.byStart))
	inBatch := false
	for _, ev := range set.log {
		m := local[ev.life]
		if m < 0 {
			continue
		}
		if ev.retire {
			if !inBatch {
				o.barriers++
				inBatch = true
			}
			o.retiredAt[m] = int32(o.barriers - 1)
			mark[rank[m]] = -1
			dead++
			continue
		}
		inBatch = false
		o.startsAt[m] = int32(o.barriers - 1)
		r := rank[m]
		if dead > len(active)/2 {
			active = slices.DeleteFunc(active, func(a int32) bool { return mark[a] < 0 })
			dead = 0
		}
		// The active lives, latest started first: those before r get a
		// direct arc to it, but for those with a direct arc to one that
		// has (implied), found without a look at their uses; the others
		// conflict with r.
		from, dfrom := len(earlier), len(o.direct)
		// Room for all the active lives, doubling (append grows big slices
		// by a quarter, copying them over and over).
		earlier = grow(earlier, len(active))
		o.direct = grow(o.direct, len(active))
		for i := len(active) - 1; i >= 0; i-- {
			a := active[i]
			if k := mark[a]; k < 0 || k == r+1 {
				continue
			}
			if !before(a, r) {
				earlier = append(earlier, a)
				degree[a]++
				continue
			}
			o.direct = append(o.direct, a)
			lo := int32(0)
			if a > 0 {
				lo = o.directEnd[a-1]
			}
			for _, x := range o.direct[lo:o.directEnd[a]] {
				if mark[x] >= 0 {
					mark[x] = r + 1
				}
			}
		}
		slices.Reverse(earlier[from:])
		slices.Reverse(o.direct[dfrom:])
		degree[r] += int32(len(earlier) - from)
		o.directEnd = append(o.directEnd, int32(len(o.direct)))
		earlierEnd = append(earlierEnd, int32(len(earlier)))
		active = append(active, r)
	}
	o.earlier, o.earlierEnd, o.degree = earlier, earlierEnd, degree
	return o
}

// gatherConflicts sets o.conflicts, each life's: those started before
// it, then those started after it, in the order they started.
func (o *lifeOrder) gatherConflicts() {
	n := len(o.members)
	start := make([]int32, n+1)
	for r, m := range o.byStart {
		start[m+1] = o.degree[r]
	}
	for m := range n {
		start[m+1] += start[m]
	}
	o.conflicts = adjacency{start: start, to: make([]int32, start[n])}
	at := slices.Clone(start[:n]) // where the next conflict of each life goes
	prev := int32(0)
	for r, m := range o.byStart {
		for _, a := range o.earlier[prev:o.earlierEnd[r]] {
			x := o.byStart[a]
			o.conflicts.to[at[m]] = x
			at[m]++
			o.conflicts.to[at[x]] = int32(m)
			at[x]++
		}
		prev = o.earlierEnd[r]
	}
	o.earlier, o.earlierEnd, o.degree = nil, nil, nil
}

// grow returns s with room for n more, doubling its capacity when it
// needs more.
func grow(s []int32, n int) []int32 {
	if len(s)+n <= cap(s) {
		return s
	}
	return slices.Grow(s, max(n, len(s)))
}
