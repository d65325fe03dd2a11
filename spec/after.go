package spec

// Op names and explicit order: made-up names, after lists and their cycles.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// opNamed is the declaration of the op called name, or nil: one the spec
// names, else one whose made-up name it is.
func (ds *decls) opNamed(name string) *opDecl {
	if i := ds.opAt(name); i >= 0 {
		return ds.ops[i]
	}
	return nil
}

// opAt is the position in l.ops of the op called name, or -1.
func (ds *decls) opAt(name string) int {
	if i, ok := ds.opNames[name]; ok {
		if int(i) < len(ds.ops) { // opSites adds names beyond
			return int(i)
		}
		return -1
	}
	i, ok := madeUp(name, len(ds.ops), func(i int) bool {
		d := ds.ops[i]
		return !d.named && d.op != nil && d.op.Name == name
	})
	if !ok {
		return -1
	}
	return i
}

// madeUp finds the op whose made-up name is name among n ops, is telling
// whether op i is called name. nameOps makes a name of a base and the op's
// index, with _2, _3, ... after it when that is taken, so the digits at the
// end of name, before an _N, say which ops it can be. Names being unique,
// the op called name is the one whatever the base. Made-up names are found
// this way, rather than kept in a map, because a spec may have millions.
func madeUp(name string, n int, is func(i int) bool) (int, bool) {
	stem := name
	for range 2 {
		j := len(stem)
		for j > 0 && stem[j-1] >= '0' && stem[j-1] <= '9' {
			j--
		}
		for k := len(stem) - 1; k >= j && len(stem)-k <= 10; k-- {
			if digits := stem[k:]; len(digits) == 1 || digits[0] != '0' {
				if i, err := strconv.Atoi(digits); err == nil && i < n && is(i) {
					return i, true
				}
			}
		}
		// Without an _N after the index, and look again.
		u := strings.LastIndexByte(stem, '_')
		if u < 0 || j != u+1 || j == len(stem) {
			break
		}
		stem = stem[:u]
	}
	return 0, false
}

// nameOps gives every op without a name one made from its kind (or kernel
// or host step) and its index, unique among the names the spec gives and
// the names made before. An op of a body has its control op's name and a
// slash before it (refine/scale3), which no name a spec gives can have:
// the index is its place among all the ops, bodies' too, so that names
// are found again as madeUp finds them.
func (ds *decls) nameOps() {
	var buf []byte
	// The names are cut from a few kilobytes of text at a time: one
	// allocation for hundreds of names rather than one each. A
	// strings.Builder never changes what it has written, so each name
	// stays valid when the text grows or the next one starts.
	var text strings.Builder
	for i, d := range ds.ops {
		if d.op == nil || d.op.Name != "" {
			continue
		}
		base := d.kind
		if d.label != "" {
			base = d.label
		}
		buf = buf[:0]
		if b, ok := ds.bodies[d]; ok && b.parent.op != nil {
			buf = append(append(buf, b.parent.op.Name...), '/')
		}
		buf = strconv.AppendInt(append(buf, base...), int64(i), 10)
		if text.Cap()-text.Len() < len(buf) {
			text = strings.Builder{}
			text.Grow(max(4096, len(buf)))
		}
		text.Write(buf)
		all := text.String()
		name := all[len(all)-len(buf):]
		if ds.opNamed(name) != nil {
			base = name
			for n := 2; ds.opNamed(name) != nil; n++ {
				name = fmt.Sprintf("%s_%d", base, n)
			}
		}
		d.op.With(dag.Name(name))
	}
}

// addAfter adds the after edges. The names of every declaration are
// checked, wrong ones too, so that a misspelt name comes in the first
// round; and since a wrong op is not in the graph, whose check would find
// its cycles, the after edges through wrong ops are checked for cycles
// here.
func (ds *decls) addAfter() {
	var names []string  // for suggestions, made on the first unknown name
	var edges [][]int32 // declaration -> the declarations it is after
	failed := false
	for i, d := range ds.ops {
		failed = failed || d.op == nil
		for _, n := range d.after {
			name, ok := ds.str(n, about("after"))
			if !ok {
				continue
			}
			j := ds.opAt(name)
			if j < 0 {
				if ds.wrongUnnamed(name) {
					continue // a made-up name of a wrong op: its error is reported
				}
				if names == nil {
					for _, d := range ds.ops {
						if d.op != nil {
							names = append(names, d.op.Name)
						}
					}
				}
				ds.errorf(n, ds.suggest(name, names), "after names unknown op %q", name)
				continue
			}
			p := ds.ops[j]
			if ds.bodyOf(p) != ds.bodyOf(d) {
				ds.errorf(n, ds.afterHint(d), "%s: after names %s, which is not in the same list of ops", ds.label(d), ds.label(p))
				continue
			}
			if edges == nil {
				edges = make([][]int32, len(ds.ops))
			}
			edges[i] = append(edges[i], int32(j))
			if d.op != nil && p.op != nil {
				d.op.With(dag.After(p.op))
			}
		}
	}
	if failed && edges != nil {
		ds.afterCycles(edges)
	}
}

// afterHint says what an after list of op d may name instead of an op of
// another list: ops of its own list, or, for an op of a body, nothing
// outside it, which the loop or branch itself can be after.
func (ds *decls) afterHint(d *opDecl) string {
	b, ok := ds.bodies[d]
	if !ok {
		return "name the while or if that holds it: ops after it wait for its whole body"
	}
	return "name ops of the same body; put the after on " + ds.label(b.parent) + " for ops outside it"
}

// wrongUnnamed reports whether name is the name an unnamed op that is
// wrong would have been given.
func (ds *decls) wrongUnnamed(name string) bool {
	_, ok := madeUp(name, len(ds.ops), func(i int) bool {
		d := ds.ops[i]
		return !d.named && d.op == nil
	})
	return ok
}

// afterCycles reports the cycles of after edges that pass through a wrong
// op (the graph's check finds the others), one per strongly connected
// set of ops, at the after of its first op.
func (ds *decls) afterCycles(edges [][]int32) {
	var given map[*opDecl]string // the names the spec gives, by declaration
	for _, scc := range stronglyConnected(edges) {
		if len(scc) == 1 && !slices.Contains(edges[scc[0]], scc[0]) {
			continue
		}
		wrong := false
		for _, i := range scc {
			wrong = wrong || ds.ops[i].op == nil
		}
		if !wrong {
			continue
		}
		if given == nil {
			given = make(map[*opDecl]string, len(ds.opNames))
			for name, i := range ds.opNames {
				if int(i) < len(ds.ops) {
					given[ds.ops[i]] = name
				}
			}
		}
		name := func(d *opDecl) string {
			switch {
			case d.op != nil:
				return d.op.Name
			case d.named:
				return given[d]
			}
			return ds.unnamedLabel(d)
		}
		slices.Sort(scc)
		path := cyclePath(edges, scc)
		labels := make([]string, len(path))
		for i, d := range path {
			labels[i] = name(ds.ops[d])
		}
		first := ds.ops[path[0]]
		what := ds.unnamedLabel(first)
		if first.named {
			what = "op " + strconv.Quote(name(first))
		}
		ds.errorf(first.after[0], "remove one of these after edges or reorder the operations",
			"%s: dependency cycle: %s", what, strings.Join(labels, " -> "))
	}
}

// cyclePath is a cycle through the strongly connected declarations scc
// (sorted), from its first back to it: a breadth-first search within scc.
func cyclePath(edges [][]int32, scc []int32) []int32 {
	start := scc[0]
	in := func(v int32) bool { _, ok := slices.BinarySearch(scc, v); return ok }
	prev := map[int32]int32{}
	queue := []int32{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range edges[v] {
			if w == start {
				path := []int32{start}
				for u := v; u != start; u = prev[u] {
					path = append(path, u)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if _, seen := prev[w]; !seen && in(w) {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int32{start, start}
}

// stronglyConnected returns the strongly connected components of the
// graph edges (Tarjan's algorithm, iterative: specs may be long chains).
func stronglyConnected(edges [][]int32) [][]int32 {
	n := len(edges)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct{ v, e int32 }
	for root := range int32(n) {
		if index[root] >= 0 {
			continue
		}
		calls := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if int(f.e) < len(edges[f.v]) {
				w := edges[f.v][f.e]
				f.e++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var scc []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					scc = append(scc, w)
					if w == v {
						break
					}
				}
				out = append(out, scc)
			}
		}
	}
	return out
}
