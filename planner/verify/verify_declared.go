package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// A plan of a rewritten graph (plan.Plan.Declared, Parts: ops fused into
// one) is checked twice: as a plan of its own graph (memory included),
// and against the graph as declared, which is what the program means.

// checkDeclared checks a plan whose graph a rewrite changed against the
// graph as declared: Parts names every declared op exactly once; each op
// of the plan's graph uses the bytes its parts use and no others (writes
// only where a part writes), so that the plan's own checks (its conflicts
// and arenas) count every byte the parts use; and the plan, each run of
// an op replaced by runs of its parts in order on its stream, orders
// every conflicting pair of declared ops, every declared dependency and
// every lifetime (the checks of Verify, but the arenas').
func checkDeclared(p *plan.Plan) error {
	d := p.Declared
	g := p.Graph
	if d == nil || g == nil {
		return nil
	}
	if len(p.Parts) != len(g.Ops) {
		return malformed("the plan has parts for %d ops of a graph of %d", len(p.Parts), len(g.Ops))
	}
	if len(d.Buffers) != len(g.Buffers) {
		return malformed("the declared graph has %d buffers and the planned one %d", len(d.Buffers), len(g.Buffers))
	}
	for i, b := range d.Buffers {
		if g.Buffers[i] != b {
			return malformed("buffer %d of the planned graph is not the declared graph's", i)
		}
	}
	// The declared graph's ops, buffers and views are well formed, as the
	// planned graph's are by now.
	if _, err := newVerifier(&plan.Plan{Graph: d, OpStream: make([]int32, len(d.Ops))}); err != nil {
		if ve, ok := err.(*Error); ok {
			return &Error{Kind: ve.Kind, Ops: ve.Ops, Msg: "the graph as declared: " + ve.Msg}
		}
		return err
	}
	// Ops of the plan with the same parts are pieces of them (a split):
	// together they run those parts once.
	groups, err := pieceGroups(p)
	if err != nil {
		return err
	}
	whole := make([]int32, len(d.Ops)) // the group that runs each declared op, +1
	for gi, members := range groups {
		for _, dp := range p.Parts[members[0]] {
			if dp < 0 || int(dp) >= len(d.Ops) || d.Ops[dp] == nil {
				return malformed("op %d of the plan runs declared op %d of %d", members[0], dp, len(d.Ops))
			}
			if whole[dp] != 0 {
				name := d.Ops[dp].Name
				return &Error{Kind: OpTwice, Ops: []string{name},
					Msg: fmt.Sprintf("declared op %q is part of two ops of the plan", name)}
			}
			whole[dp] = int32(gi) + 1
		}
	}
	for dp, w := range whole {
		if w == 0 {
			name := d.Ops[dp].Name
			return &Error{Kind: OpMissing, Ops: []string{name}, Msg: fmt.Sprintf("declared op %q is part of no op of the plan", name)}
		}
	}
	for _, members := range groups {
		ops := make([]*dag.Op, len(members))
		for k, i := range members {
			if ops[k] = g.Ops[i]; ops[k] == nil {
				return malformed("op %d of the graph is missing", i)
			}
		}
		if err := checkCover(ops, d, p.Parts[members[0]]); err != nil {
			return err
		}
	}
	expanded, err := expand(p, groups)
	if err != nil {
		return err
	}
	if err := verify(expanded, false); err != nil {
		if ve, ok := err.(*Error); ok {
			return &Error{Kind: ve.Kind, Ops: ve.Ops, Msg: "against the graph as declared: " + ve.Msg}
		}
		return err
	}
	return nil
}

// span is a byte range of a buffer.
type span struct{ start, end int64 }

// pieceGroups groups the ops of p's graph that run the same parts, in
// order: one op each where nothing was split. The pieces of a split are
// consecutive ops (rewrite.Split makes them so); pieces apart from each
// other are two groups, which the check refuses as one op run twice.
func pieceGroups(p *plan.Plan) ([][]int, error) {
	var groups [][]int
	for i, parts := range p.Parts {
		if len(parts) == 0 {
			return nil, malformed("op %d of the plan runs no declared op", i)
		}
		if n := len(groups); n > 0 && slices.Equal(p.Parts[groups[n-1][0]], parts) {
			groups[n-1] = append(groups[n-1], i)
			continue
		}
		groups = append(groups, []int{i})
	}
	return groups, nil
}

// checkCover checks that ops, an op of the plan or the pieces of one,
// use exactly the bytes their declared parts use: each of their accesses
// within the parts' (a write within their writes), each of the parts'
// within the ops' together (a write within their writes).
func checkCover(ops []*dag.Op, d *dag.Graph, parts []int32) error {
	op := ops[0]
	type use struct {
		dag.Access
		part *dag.Op
	}
	var mine, theirs []dag.Access
	var uses []use
	for _, o := range ops {
		for _, a := range accessesOf(o) {
			if a.Size > 0 {
				mine = append(mine, a)
			}
		}
	}
	names := make([]string, len(parts))
	for k, dp := range parts {
		part := d.Ops[dp]
		names[k] = part.Name
		for _, a := range accessesOf(part) {
			if a.Size > 0 {
				theirs = append(theirs, a)
				uses = append(uses, use{a, part})
			}
		}
	}
	fail := func(format string, a ...any) error {
		return &Error{Kind: Malformed, Ops: append([]string{op.Name}, names...),
			Msg: fmt.Sprintf("op %q (which runs %s) ", op.Name, strings.Join(names, ", ")) + fmt.Sprintf(format, a...)}
	}
	for _, a := range mine {
		if !covered(a, theirs, false) {
			return fail("%s %s, which its parts do not use", modeVerb(op, a.Mode), a.View)
		}
		if a.Mode.Writes() && !covered(a, theirs, true) {
			return fail("%s %s, which its parts do not write", modeVerb(op, a.Mode), a.View)
		}
	}
	for _, u := range uses {
		if !covered(u.Access, mine, false) {
			return fail("does not use %s, which %q %s", u.View, u.part.Name, modeVerb(u.part, u.Mode))
		}
		if u.Mode.Writes() && !covered(u.Access, mine, true) {
			return fail("does not write %s, which %q %s", u.View, u.part.Name, modeVerb(u.part, u.Mode))
		}
	}
	return nil
}

// covered reports whether the bytes of a lie within the union of the
// accesses of set to a's buffer (of those that write, with writes).
func covered(a dag.Access, set []dag.Access, writes bool) bool {
	var spans []span
	for _, b := range set {
		if b.Buf == a.Buf && (!writes || b.Mode.Writes()) && b.Overlaps(a.View) {
			spans = append(spans, span{start: b.Offset, end: b.End()})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	at := a.Offset
	for _, s := range spans {
		if s.start > at {
			return false
		}
		at = max(at, s.end)
		if at >= a.End() {
			return true
		}
	}
	return at >= a.End()
}

// expand is p as a plan of p.Declared: each run of an op, runs of its
// parts in order on its stream; a record after the op follows its last
// part, a wait before it precedes its first. The pieces of a split run
// their parts once, where the last of them to run does: a use of the
// whole is ordered only where it is ordered after every piece. Its
// arenas are left out (they are p's, checked on p's graph, whose ops use
// the same bytes).
func expand(p *plan.Plan, groups [][]int) (*plan.Plan, error) {
	d := p.Declared
	groupOf := make([]int, len(p.Parts))
	for gi, members := range groups {
		for _, m := range members {
			groupOf[m] = gi
		}
	}
	last := make([]int32, len(groups)) // the piece of each group that runs last
	for i := range last {
		last[i] = -1
	}
	for _, st := range p.Steps {
		if st.Kind == plan.Run && st.Op >= 0 && int(st.Op) < len(p.Parts) {
			last[groupOf[st.Op]] = st.Op
		}
	}
	lastRun := func(i int32) int32 { return last[groupOf[i]] }
	e := &plan.Plan{Graph: d, Streams: p.Streams, Events: p.Events, OpStream: make([]int32, len(d.Ops)),
		Topology: p.Topology, SMs: p.SMs}
	steps := make([]plan.Step, 0, len(p.Steps)+len(d.Ops)-len(p.Graph.Ops))
	for i, st := range p.Steps {
		if st.Op >= 0 && int(st.Op) >= len(p.Parts) {
			return nil, malformed("step %d (%s) names op %d of %d", i, st.Kind, st.Op, len(p.Parts))
		}
		switch {
		case st.Kind == plan.Run && st.Op >= 0 && lastRun(st.Op) != st.Op:
			continue // a piece that runs before the last of its group
		case st.Kind == plan.Run && st.Op >= 0:
			for _, dp := range p.Parts[st.Op] {
				steps = append(steps, plan.Step{Kind: plan.Run, Stream: st.Stream, Op: dp, Event: st.Event})
			}
			continue
		case st.Kind == plan.Record && st.Op >= 0:
			parts := p.Parts[st.Op]
			st.Op = parts[len(parts)-1]
		case st.Op >= 0:
			st.Op = p.Parts[st.Op][0]
		}
		steps = append(steps, st)
	}
	e.Steps = steps
	for i, parts := range p.Parts {
		if r := lastRun(int32(i)); r >= 0 && int(r) < len(p.OpStream) {
			for _, dp := range parts {
				e.OpStream[dp] = p.OpStream[r]
			}
		}
	}
	if len(p.Bodies) > 0 {
		e.Bodies = make(map[int][]*plan.Plan, len(p.Bodies))
		for id, b := range p.Bodies {
			if id < 0 || id >= len(p.Parts) {
				return nil, malformed("the plan has bodies for op %d of %d", id, len(p.Parts))
			}
			e.Bodies[int(p.Parts[id][0])] = b
		}
	}
	return e, nil
}
