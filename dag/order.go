package dag

import (
	"container/heap"
	"slices"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// addAfter adds the explicit After edges (but not those of ops whose after
// list names ops of no graph). When one points forward the ops are put into a
// topological order again (declaration order where possible). Every
// dependency cycle is an error naming its ops; then the ops are returned in
// their old order.
func addAfter(ops []*Op) ([]*Op, ErrorList) {
	forward := false
	for _, o := range ops {
		if o.more == nil || len(o.more.after) == 0 || o.badAfter {
			continue
		}
		for _, p := range o.more.after {
			if !slices.Contains(o.Deps, int32(p.ID)) {
				o.Deps = append(o.Deps, int32(p.ID))
			}
			forward = forward || p.ID >= o.ID
		}
	}
	if !forward {
		return ops, nil
	}
	// Kahn's algorithm, taking the earliest declared ready op first.
	indeg := make([]int, len(ops))
	succ := make([][]int32, len(ops))
	for _, o := range ops {
		for _, d := range o.Deps {
			indeg[o.ID]++
			succ[d] = append(succ[d], int32(o.ID))
		}
	}
	var ready idHeap
	for i, n := range indeg {
		if n == 0 {
			ready = append(ready, int32(i)) // ascending: already a heap
		}
	}
	order := make([]*Op, 0, len(ops))
	for len(ready) > 0 {
		i := ready.pop()
		order = append(order, ops[i])
		for _, s := range succ[i] {
			if indeg[s]--; indeg[s] == 0 {
				ready.push(s)
			}
		}
	}
	if len(order) < len(ops) {
		return ops, cycleErrors(ops, indeg)
	}
	newID := make([]int32, len(ops))
	for i, o := range order {
		newID[o.ID] = int32(i)
	}
	for i, o := range order {
		for j, d := range o.Deps {
			o.Deps[j] = newID[d]
		}
		o.ID = i
	}
	return order, nil
}

// cycleErrors names the ops of every cycle among the ops Kahn's algorithm
// could not order. It runs only when there is a cycle, so gonum's general
// graph types cost nothing on the way of a valid graph.
func cycleErrors(ops []*Op, indeg []int) ErrorList {
	g := simple.NewDirectedGraph()
	for _, o := range ops {
		if indeg[o.ID] == 0 {
			continue
		}
		for _, d := range o.Deps {
			if indeg[d] > 0 && int(d) != o.ID {
				g.SetEdge(g.NewEdge(simple.Node(d), simple.Node(o.ID)))
			}
		}
	}
	var errs ErrorList
	for _, scc := range topo.TarjanSCC(g) {
		if len(scc) < 2 {
			continue
		}
		ids := make([]int, len(scc))
		for i, n := range scc {
			ids[i] = int(n.ID())
		}
		slices.Sort(ids)
		cyc := cyclePath(ops, ids)
		names := make([]string, len(cyc))
		for i, id := range cyc {
			names[i] = ops[id].Name
		}
		errs = append(errs, &Error{Op: names[0], Field: "after", Msg: "dependency cycle: " + strings.Join(names, " -> "),
			Hint: "remove one of these after edges or reorder the operations", decl: ops[cyc[0]].decl})
	}
	if len(errs) == 0 {
		errs = append(errs, &Error{Msg: "dependency cycle", Hint: "remove an after edge"})
	}
	return errs
}

// cyclePath walks the strongly connected component ids from its first op
// along dependencies until it returns, giving the cycle in execution order.
func cyclePath(ops []*Op, ids []int) []int {
	in := make(map[int]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	start := ids[0]
	path := []int{start}
	seen := map[int]int{start: 0}
	cur := start
	for {
		next := -1
		for _, d := range ops[cur].Deps {
			if in[int(d)] && int(d) != cur {
				next = int(d)
				break
			}
		}
		if at, ok := seen[next]; ok {
			cyc := append(path[at:], next)
			slices.Reverse(cyc)
			return cyc
		}
		seen[next] = len(path)
		path = append(path, next)
		cur = next
	}
}

// idHeap is a container/heap of op IDs, smallest first. push and pop keep
// IDs unboxed (as planner's opHeap does); Push and Pop exist for
// heap.Interface.
type idHeap []int32

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(int32)) }

func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *idHeap) push(id int32) {
	*h = append(*h, id)
	heap.Fix(h, len(*h)-1)
}

func (h *idHeap) pop() int32 {
	old := *h
	id, n := old[0], len(old)-1
	old[0] = old[n]
	*h = old[:n]
	if n > 0 {
		heap.Fix(h, 0)
	}
	return id
}
