package memory

import (
	"github.com/dagrun/dagrun/dag"
)

// flow is a network for maximum flow, with int64 capacities
// (math.MaxInt64 for unbounded), from a source to a sink that are not
// among its nodes: each node's arcs from the source and to the sink are
// its capacities source and sink. In a peak's network those are a quarter
// of the arcs, one for each of a temporary's two nodes; kept apart, they
// leave the walks of the nodes' arcs shorter.
type flow struct {
	head     []int32 // the first arc out of each node, -1 for none
	next, to []int32 // each arc's next arc out of its node, and its head; arc a^1 is a's reverse
	cap      []int64 // residual capacities
	// The residual capacities of the arcs from the source and to the sink,
	// by node. Their reverses need none: no path that adds flow goes back
	// to the source or on from the sink, and the source side is what the
	// source reaches.
	source, sink []int64
}

// newFlow returns a network of nodes nodes with room for edges edges
// between them.
func newFlow(nodes, edges int) *flow {
	f := &flow{head: make([]int32, nodes), next: make([]int32, 0, 2*edges), to: make([]int32, 0, 2*edges), cap: make([]int64, 0, 2*edges),
		source: make([]int64, nodes), sink: make([]int64, nodes)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

// edge adds an arc u->v of capacity c, and its reverse.
func (f *flow) edge(u, v int, c int64) {
	a := int32(len(f.to))
	f.to = append(f.to, int32(v), int32(u))
	f.cap = append(f.cap, c, 0)
	f.next = append(f.next, f.head[u], f.head[v])
	f.head[u], f.head[v] = a, a+1
}

// sourceSide returns the nodes that the residual network of a maximum flow
// from the source to the sink reaches from the source: the source side of
// the minimum cut nearest the source, the same for every maximum flow. f
// may carry a flow already; it is left reversed, and spent.
//
// Reversed (each arc's residual capacity swapped with its reverse's, which
// turns f's flow into one from the sink to the source), the nodes that
// reach the source in the residual network are those that reach it, now a
// sink, after the first phase of push-relabel from the sink: a maximum
// preflow, whose residual network differs from a maximum flow's only among
// nodes that cannot reach the sink.
func (f *flow) sourceSide() []bool {
	for a := 0; a < len(f.cap); a += 2 {
		f.cap[a], f.cap[a+1] = f.cap[a+1], f.cap[a]
	}
	pr := newPushRelabel(f)
	pr.run()
	return pr.reaching()
}

// reaching returns the nodes that reach t in the residual network: those
// relabelAll would label below n.
func (pr *pushRelabel) reaching() []bool {
	f := pr.f
	out := make([]bool, len(f.head))
	pr.queue = pr.queue[:0]
	for v, c := range pr.toT {
		if c > 0 {
			out[v] = true
			pr.queue = append(pr.queue, int32(v))
		}
	}
	for k := 0; k < len(pr.queue); k++ {
		v := pr.queue[k]
		for a := f.head[v]; a >= 0; a = f.next[a] {
			if u := f.to[a]; !out[u] && f.cap[a^1] > 0 {
				out[u] = true
				pr.queue = append(pr.queue, u)
			}
		}
	}
	return out
}

// pushRelabel is the first phase of Goldberg and Tarjan's push-relabel
// algorithm, highest label first, with the gap and global relabelling
// heuristics, on a reversed flow: from s, the flow's sink, to t, its
// source, both off the nodes. It ends with a maximum preflow, all excess
// stuck at nodes that cannot reach t.
type pushRelabel struct {
	f              *flow
	toT            []int64 // the residual capacities of the arcs to t, by node: the flow's source's
	n              int32   // the label of the nodes that cannot reach t, above every distance to it
	label          []int32 // a lower bound on each node's distance to t in the residual network
	excess         []int64
	cur            []int32 // each node's current arc
	active, next   []int32 // the nodes with excess, by label: stacks, linked by next
	top            int32   // no active node is labelled above it
	first          []int32 // the nodes of each label, a list linked by after and before, for gaps
	after, before  []int32
	highest        int32 // no node below n is labelled above it
	work, interval int   // the work of relabelling since the last global relabel, and the most between two
	queue          []int32
}

func newPushRelabel(f *flow) *pushRelabel {
	nodes := int32(len(f.head))
	n := nodes + 1 // t is at 0; a path to it passes each node at most once
	pr := &pushRelabel{f: f, toT: f.source, n: n, label: make([]int32, nodes), excess: make([]int64, nodes),
		cur: make([]int32, nodes), active: make([]int32, n), next: make([]int32, nodes), first: make([]int32, n), after: make([]int32, nodes), before: make([]int32, nodes),
		interval: 6*int(n) + len(f.to), queue: make([]int32, 0, nodes)}
	for v := range pr.active {
		pr.active[v] = -1
	}
	return pr
}

// run pushes from s whatever its arcs hold, and then discharges the active
// nodes, highest label first, until none can reach t.
func (pr *pushRelabel) run() {
	copy(pr.excess, pr.f.sink)
	pr.relabelAll()
	for {
		for pr.top >= 0 && pr.active[pr.top] < 0 {
			pr.top--
		}
		if pr.top < 0 {
			return
		}
		u := pr.active[pr.top]
		pr.active[pr.top] = pr.next[u]
		if pr.label[u] == pr.top && pr.excess[u] > 0 {
			pr.discharge(u)
		}
		if pr.work > pr.interval {
			pr.relabelAll()
		}
	}
}

// push sends d along arc a out of u, and activates the arc's head.
func (pr *pushRelabel) push(u, a int32, d int64) {
	f := pr.f
	v := f.to[a]
	f.cap[a] -= d
	f.cap[a^1] = dag.AddSat(f.cap[a^1], d)
	pr.excess[u] -= d
	if pr.excess[v] == 0 && pr.label[v] < pr.n {
		pr.activate(v)
	}
	pr.excess[v] = dag.AddSat(pr.excess[v], d)
}

// discharge pushes u's excess along admissible arcs (to a node labelled
// one less), relabelling u when it has none, until the excess is gone or u
// cannot reach t.
func (pr *pushRelabel) discharge(u int32) {
	f := pr.f
	for pr.excess[u] > 0 {
		if c := pr.toT[u]; c > 0 && pr.label[u] == 1 { // the arc to t, labelled 0
			d := min(pr.excess[u], c)
			pr.toT[u] -= d
			pr.excess[u] -= d
			continue
		}
		a := pr.cur[u]
		if a < 0 {
			if !pr.relabel(u) {
				return
			}
			continue
		}
		if c := f.cap[a]; c > 0 && pr.label[f.to[a]] == pr.label[u]-1 {
			pr.push(u, a, min(pr.excess[u], c))
			if f.cap[a] > 0 {
				continue // u is empty
			}
		}
		pr.cur[u] = f.next[a]
	}
}

// relabel lifts u above its lowest residual neighbour, or to n when it
// has none or its label's class empties (a gap: none above it can reach t
// then), and reports whether u can still reach t.
func (pr *pushRelabel) relabel(u int32) bool {
	f := pr.f
	h := pr.label[u]
	pr.unlist(u)
	to := pr.n
	if pr.toT[u] > 0 {
		to = 1
	}
	for a := f.head[u]; a >= 0; a = f.next[a] {
		pr.work++
		if f.cap[a] > 0 {
			to = min(to, pr.label[f.to[a]]+1)
		}
	}
	pr.work += 12
	if pr.first[h] < 0 { // a gap
		for k := h + 1; k <= pr.highest; k++ {
			for v := pr.first[k]; v >= 0; v = pr.after[v] {
				pr.label[v] = pr.n
			}
			pr.first[k] = -1
		}
		pr.highest = h - 1
		to = pr.n
	}
	pr.label[u] = to
	if to >= pr.n {
		return false
	}
	pr.list(u)
	pr.cur[u] = f.head[u]
	return true
}

// activate puts v on the stack of the active nodes of its label.
func (pr *pushRelabel) activate(v int32) {
	h := pr.label[v]
	pr.next[v], pr.active[h] = pr.active[h], v
	pr.top = max(pr.top, h)
}

// list adds u to the nodes of its label, unlist takes it out.
func (pr *pushRelabel) list(u int32) {
	h := pr.label[u]
	pr.before[u], pr.after[u] = -1, pr.first[h]
	if pr.first[h] >= 0 {
		pr.before[pr.first[h]] = u
	}
	pr.first[h] = u
	pr.highest = max(pr.highest, h)
}

func (pr *pushRelabel) unlist(u int32) {
	if b := pr.before[u]; b >= 0 {
		pr.after[b] = pr.after[u]
	} else {
		pr.first[pr.label[u]] = pr.after[u]
	}
	if a := pr.after[u]; a >= 0 {
		pr.before[a] = pr.before[u]
	}
}

// relabelAll labels every node with its distance to t in the residual
// network (n where it cannot reach t), by a search back from t, and
// gathers the active nodes anew.
func (pr *pushRelabel) relabelAll() {
	f := pr.f
	for v := range pr.label {
		pr.label[v] = pr.n
	}
	for h := range pr.first {
		pr.first[h], pr.active[h] = -1, -1
	}
	pr.queue = pr.queue[:0]
	for v, c := range pr.toT {
		if c > 0 {
			pr.label[v] = 1
			pr.queue = append(pr.queue, int32(v))
		}
	}
	for k := 0; k < len(pr.queue); k++ {
		v := pr.queue[k]
		for a := f.head[v]; a >= 0; a = f.next[a] {
			if u := f.to[a]; pr.label[u] == pr.n && f.cap[a^1] > 0 {
				pr.label[u] = pr.label[v] + 1
				pr.queue = append(pr.queue, u)
			}
		}
	}
	pr.top, pr.highest = -1, 0
	for _, v := range pr.queue {
		pr.list(v)
		pr.cur[v] = f.head[v]
		if pr.excess[v] > 0 {
			pr.activate(v)
		}
	}
	pr.work = 0
}
