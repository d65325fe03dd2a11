package memory

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// Dinic's algorithm, which found the peak before push-relabel did: the
// reference the property tests hold flow.sourceSide to.

// dinicState is what Dinic's algorithm keeps besides the network.
type dinicState struct {
	level, cursor, queue []int32
}

// dinicSourceSide runs Dinic's algorithm to a maximum flow from f's source
// to its sink, made nodes with arcs of their own, and returns the nodes
// its residual network reaches from the source.
func (f *flow) dinicSourceSide() []bool {
	nodes := len(f.head)
	s, t := nodes, nodes+1
	g := newFlow(nodes+2, len(f.to)/2+2*nodes)
	for a := 0; a < len(f.to); a += 2 {
		g.edge(int(f.to[a+1]), int(f.to[a]), f.cap[a])
		g.cap[len(g.cap)-1] = f.cap[a+1]
	}
	for v := range nodes {
		if c := f.source[v]; c > 0 {
			g.edge(s, v, c)
		}
		if c := f.sink[v]; c > 0 {
			g.edge(v, t, c)
		}
	}
	d := &dinicState{level: make([]int32, len(g.head)), cursor: make([]int32, len(g.head))}
	d.max(g, s, t)
	d.bfs(g, s, s)
	out := make([]bool, nodes)
	for i := range out {
		out[i] = d.level[i] >= 0
	}
	return out
}

// bfs levels the residual network from s and reports whether t is reached.
func (d *dinicState) bfs(f *flow, s, t int) bool {
	for i := range d.level {
		d.level[i] = -1
	}
	d.level[s] = 0
	d.queue = append(d.queue[:0], int32(s))
	for k := 0; k < len(d.queue); k++ {
		u := d.queue[k]
		for a := f.head[u]; a >= 0; a = f.next[a] {
			if v := f.to[a]; f.cap[a] > 0 && d.level[v] < 0 {
				d.level[v] = d.level[u] + 1
				d.queue = append(d.queue, v)
			}
		}
	}
	return d.level[t] >= 0
}

// push sends up to limit along level-increasing arcs from u to t.
func (ds *dinicState) push(f *flow, u, t int32, limit int64) int64 {
	if u == t {
		return limit
	}
	for ; ds.cursor[u] >= 0; ds.cursor[u] = f.next[ds.cursor[u]] {
		a := ds.cursor[u]
		v := f.to[a]
		if f.cap[a] <= 0 || ds.level[v] != ds.level[u]+1 {
			continue
		}
		if d := ds.push(f, v, t, min(limit, f.cap[a])); d > 0 {
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
func (ds *dinicState) max(f *flow, s, t int) int64 {
	var total int64
	for ds.bfs(f, s, t) {
		copy(ds.cursor, f.head)
		for {
			d := ds.push(f, int32(s), int32(t), math.MaxInt64)
			if d == 0 {
				break
			}
			total = dag.AddSat(total, d)
		}
	}
	return total
}

// TestSourceSideRandomNetworks compares sourceSide with Dinic's algorithm
// on small random networks, some arcs and some capacities from the source
// and to the sink unbounded (but no path of them from source to sink, as
// in the peak's network).
func TestSourceSideRandomNetworks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	compared := 0
	for k := range 5000 {
		n := 2 + r.IntN(12)
		if k%10 == 0 {
			n = 20 + r.IntN(300)
		}
		arcs := r.IntN(4 * n)
		build := func() *flow {
			r := rand.New(rand.NewPCG(uint64(k), 9))
			capacity := func() int64 {
				if r.IntN(5) == 0 {
					return math.MaxInt64
				}
				return int64(r.IntN(20))
			}
			f := newFlow(n, arcs)
			for range arcs {
				f.edge(r.IntN(n), r.IntN(n), capacity())
			}
			for v := range n {
				switch r.IntN(4) {
				case 0:
					f.source[v] = capacity()
				case 1:
					f.sink[v] = capacity()
				case 2:
					f.source[v], f.sink[v] = capacity(), capacity()
				}
			}
			return f
		}
		f := build()
		unbounded := make([]bool, n)
		for v, c := range f.source {
			unbounded[v] = c == math.MaxInt64
		}
		for range n {
			for a, c := range f.cap {
				if c == math.MaxInt64 && unbounded[f.to[a^1]] {
					unbounded[f.to[a]] = true
				}
			}
		}
		skip := false
		for v, c := range f.sink {
			skip = skip || c == math.MaxInt64 && unbounded[v]
		}
		if skip {
			continue
		}
		require.Equal(t, f.dinicSourceSide(), build().sourceSide(), "network %d", k)
		compared++
	}
	t.Logf("%d networks", compared)
}
