package planner

import (
	"math"

	"github.com/dagrun/dagrun/dag"
)

// flow is a network for maximum flow by Dinic's algorithm, with int64
// capacities (math.MaxInt64 for unbounded).
type flow struct {
	head          []int32 // the first arc out of each node, -1 for none
	next, to      []int32 // each arc's next arc out of its node, and its head; arc a^1 is a's reverse
	cap           []int64 // residual capacities
	level, cursor []int32
	queue         []int32
}

func newFlow(nodes int) *flow {
	f := &flow{head: make([]int32, nodes), level: make([]int32, nodes), cursor: make([]int32, nodes)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

// edge adds an arc u->v of capacity c.
func (f *flow) edge(u, v int, c int64) {
	for _, a := range [2]struct {
		from, to int
		c        int64
	}{{u, v, c}, {v, u, 0}} {
		f.to = append(f.to, int32(a.to))
		f.cap = append(f.cap, a.c)
		f.next = append(f.next, f.head[a.from])
		f.head[a.from] = int32(len(f.to) - 1)
	}
}

// bfs levels the residual network from s and reports whether t is reached.
func (f *flow) bfs(s, t int) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	f.level[s] = 0
	f.queue = append(f.queue[:0], int32(s))
	for k := 0; k < len(f.queue); k++ {
		u := f.queue[k]
		for a := f.head[u]; a >= 0; a = f.next[a] {
			if v := f.to[a]; f.cap[a] > 0 && f.level[v] < 0 {
				f.level[v] = f.level[u] + 1
				f.queue = append(f.queue, v)
			}
		}
	}
	return f.level[t] >= 0
}

// push sends up to limit along level-increasing arcs from u to t.
func (f *flow) push(u, t int32, limit int64) int64 {
	if u == t {
		return limit
	}
	for ; f.cursor[u] >= 0; f.cursor[u] = f.next[f.cursor[u]] {
		a := f.cursor[u]
		v := f.to[a]
		if f.cap[a] <= 0 || f.level[v] != f.level[u]+1 {
			continue
		}
		if d := f.push(v, t, min(limit, f.cap[a])); d > 0 {
			f.cap[a] -= d
			if f.cap[a^1] < math.MaxInt64-d {
				f.cap[a^1] += d
			}
			return d
		}
	}
	return 0
}

// max returns the value of a maximum flow from s to t, saturated.
func (f *flow) max(s, t int) int64 {
	var total int64
	for f.bfs(s, t) {
		copy(f.cursor, f.head)
		for {
			d := f.push(int32(s), int32(t), math.MaxInt64)
			if d == 0 {
				break
			}
			total = dag.AddSat(total, d)
		}
	}
	return total
}

// reachable marks the nodes the residual network reaches from s: after
// max, the source side of a minimum cut.
func (f *flow) reachable(s int) []bool {
	f.bfs(s, s)
	out := make([]bool, len(f.level))
	for i, l := range f.level {
		out[i] = l >= 0
	}
	return out
}
