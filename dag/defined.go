package dag

import (
	"errors"
	"fmt"
)

// Reads of undefined contents. A byte is defined before the run when its
// buffer has an Init or is declared Uninitialized, and becomes defined
// when an op writes it; an Alloc (and a Free) makes a temporary's bytes
// undefined again. An op that reads a byte nothing defined reads garbage
// (zeros on the backends dagrun ships, which hides the mistake), so Build
// refuses it, naming the op, the buffer and the byte range.
//
// Control flow is judged so that no correct graph is refused:
//   - a loop's body is checked as its first iteration runs it: its reads
//     see what was defined before the loop and what the body wrote
//     earlier in it (a later iteration sees more, never less);
//   - after a loop, its body's writes count as done (a loop that may run
//     no iteration and leaves a buffer unwritten is not caught);
//   - each arm of a branch is checked from what was defined before it,
//     and after the branch a byte counts as defined when either arm wrote
//     it (an If whose other arm leaves it unwritten is not caught).
//
// A broadcast's buffer counts as written, not read: on every rank but the
// root it receives the data.

// ErrUndefinedRead is the cause (errors.Is) of the Build errors of ops
// that read bytes nothing defined before them.
var ErrUndefinedRead = errors.New("read of undefined contents")

// checkDefined reports the reads of ops (a built graph's, with their
// bodies built) that nothing defined before them.
func checkDefined(ops []*Op, bufs []*Buffer) ErrorList {
	d := defined{idx: segIndex{rng: 0x853c49e6748fea9b}, roots: make([]int32, len(bufs))}
	for i, b := range bufs {
		d.roots[i] = -1
		if b.Init.Kind == InitNone && !b.Uninitialized && b.Size > 0 {
			d.roots[i] = d.idx.node(0, b.Size, -1)
		}
	}
	d.walk(ops)
	return d.errs
}

// defined holds, per buffer, the byte ranges no op has defined yet: a
// treap of disjoint segments ordered by start (writer unused), so that a
// read or a write costs O(log n) plus the segments it takes away.
type defined struct {
	idx   segIndex
	roots []int32 // per buffer; -1: every byte defined
	errs  ErrorList

	// While logging (inside a branch arm), the segments writes take away,
	// so that the arm can be undone before the next arm is checked.
	logging int
	log     []span
	// outer is the graph's own op whose body is being checked (nil at
	// the top), whose place in declaration order errors in bodies take.
	outer *Op
}

type span struct {
	buf        int
	start, end int64
}

func (d *defined) walk(ops []*Op) {
	for _, o := range ops {
		d.op(o)
	}
}

func (d *defined) op(o *Op) {
	if o.badAccess {
		return
	}
	switch o.Kind.Info().Lifetime {
	case Allocates, Frees:
		b := o.Buffer()
		if b.Temporary && !b.Uninitialized {
			d.clear(b.ID)
			d.roots[b.ID] = d.idx.node(0, b.Size, -1)
		}
		return
	}
	if ctl := o.Control; ctl != nil {
		d.read(o, 0, o.Access[0])
		if d.outer == nil {
			d.outer = o
			defer func() { d.outer = nil }()
		}
		switch o.Kind.Info().Body {
		case Loop:
			if ctl.Body != nil {
				d.walk(ctl.Body.Ops)
			}
		case Branch:
			d.branch(ctl.Body, ctl.Else)
		}
		return
	}
	for i, a := range o.Access {
		if a.Mode.Reads() && o.Kind != Broadcast {
			d.read(o, i, a)
		}
	}
	for _, a := range o.Access {
		if a.Mode.Writes() || o.Kind == Broadcast {
			d.remove(a.Buf.ID, a.Offset, a.End())
		}
	}
}

// branch checks each arm from the state before the branch and leaves
// defined what either arm wrote.
func (d *defined) branch(then, els *Graph) {
	mark := len(d.log)
	d.logging++
	if then != nil {
		d.walk(then.Ops)
	}
	taken := append([]span(nil), d.log[mark:]...)
	d.log = d.log[:mark]
	for _, s := range taken {
		d.insert(s)
	}
	if els != nil {
		d.walk(els.Ops)
	}
	d.logging--
	for _, s := range taken {
		d.remove(s.buf, s.start, s.end)
	}
}

// read reports access i of o when it reads a byte nothing defined, then
// counts the bytes as defined so that one mistake is reported once.
func (d *defined) read(o *Op, i int, a Access) {
	id := a.Buf.ID
	start, end, ok := d.first(d.roots[id], a.Offset, a.End())
	if !ok {
		return
	}
	e := undefinedRead(o, i, a, start, end)
	if d.outer != nil {
		e.decl = d.outer.decl
	}
	d.errs = append(d.errs, e)
	d.remove(id, a.Offset, a.End())
}

func undefinedRead(o *Op, i int, a Access, start, end int64) *Error {
	b := a.Buf
	what := fmt.Sprintf("bytes %d:%d of %s", start, end, b.Name)
	if start == 0 && end == b.Size {
		what = "all of " + b.Name
	}
	declare := fmt.Sprintf("give %s an init, write those bytes in an op before this one, or declare %s uninitialised if the program writes it before the run (init: none in a spec, dag.Uninitialized() in Go)", b.Name, b.Name)
	e := &Error{Op: o.Name, Msg: fmt.Sprintf("reads %s, which nothing wrote before it and %s has no init", what, b.Name),
		Hint: declare, Err: ErrUndefinedRead, decl: o.decl}
	switch {
	case o.Kind == Copy && i == 0:
		e.Field = "from"
		dst := o.Access[1].Buf
		e.Hint = fmt.Sprintf("if the copy meant to fill %s from %s, swap its arguments: Copy takes the destination first (Copy(dst, src); a spec says from: and to:); else %s", b.Name, dst.Name, declare)
	case o.Kind == Launch && o.Launch != nil && o.Launch.Kernel != nil:
		for j, arg := range o.Launch.Args {
			if arg.Access == i && j < len(o.Launch.Kernel.Params) {
				e.Field = "args." + o.Launch.Kernel.Params[j].Name
			}
		}
	}
	return e
}

// first returns the first segment of treap t within [start, end), clipped
// to it.
func (d *defined) first(t int32, start, end int64) (int64, int64, bool) {
	var lo, hi int64
	found := false
	for t >= 0 {
		n := &d.idx.nodes[t]
		switch {
		case n.end <= start:
			t = n.right
		case n.start >= end:
			t = n.left
		default:
			lo, hi, found = max(n.start, start), min(n.end, end), true
			t = n.left // an earlier one may overlap too
		}
	}
	return lo, hi, found
}

// remove defines [start, end) of buffer id.
func (d *defined) remove(id int, start, end int64) {
	x := &d.idx
	t := d.roots[id]
	if t < 0 || start >= end {
		return
	}
	l, r := x.split(t, start)
	if y := x.cut(l, start); y >= 0 {
		r = x.merge(y, r)
	}
	m, r := x.split(r, end)
	if y := x.cut(m, end); y >= 0 {
		r = x.merge(y, r)
	}
	x.walk(m, func(s int32) {
		if d.logging > 0 {
			d.log = append(d.log, span{id, x.nodes[s].start, x.nodes[s].end})
		}
		x.free = append(x.free, s)
	})
	d.roots[id] = x.merge(l, r)
}

// insert makes s undefined again; no segment of its buffer overlaps it.
func (d *defined) insert(s span) {
	x := &d.idx
	n := x.node(s.start, s.end, -1)
	l, r := x.split(d.roots[s.buf], s.start)
	d.roots[s.buf] = x.merge(x.merge(l, n), r)
}

// clear defines every byte of buffer id.
func (d *defined) clear(id int) {
	x := &d.idx
	x.walk(d.roots[id], func(s int32) { x.free = append(x.free, s) })
	d.roots[id] = -1
}
