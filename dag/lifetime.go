package dag

import "fmt"

// withLifetimes checks the use of temporary buffers against their Alloc and
// Free ops and adds the ones a buffer lacks: an Alloc just before its first
// use, a Free just after its last. Ops with unusable accesses are left out
// of the check. On errors it returns nil ops.
func withLifetimes(ops []*Op, nbufs int) ([]*Op, ErrorList) {
	type life struct {
		alloc, free   *Op
		first, last   int
		explicitAlloc bool
	}
	lives := make([]life, nbufs)
	for i := range lives {
		lives[i].first = -1
	}
	var errs ErrorList
	bad := func(o *Op, hint, format string, a ...any) {
		errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf(format, a...), Hint: hint, decl: o.decl})
	}
	for i, o := range ops {
		if o.badAccess {
			continue
		}
		switch o.Kind.Info().Lifetime {
		case Allocates:
			b := o.Buffer()
			if !b.Temporary {
				continue // reported by the kind's check
			}
			l := &lives[b.ID]
			switch {
			case l.free != nil:
				bad(o, "use another temporary buffer", "%s is allocated again after %s freed it", b.Name, l.free.Name)
			case l.alloc != nil:
				bad(o, "remove one of the allocs", "%s is already allocated by %s", b.Name, l.alloc.Name)
			case l.first >= 0:
				bad(ops[l.first], "move the alloc before the first use", "uses %s before %s allocates it", b.Name, o.Name)
			}
			l.alloc, l.explicitAlloc = o, true
			continue
		case Frees:
			b := o.Buffer()
			if !b.Temporary {
				continue
			}
			l := &lives[b.ID]
			switch {
			case l.free != nil:
				bad(o, "remove one of the frees", "%s is already freed by %s", b.Name, l.free.Name)
			case l.alloc == nil && l.first < 0:
				bad(o, "remove the free", "frees %s, which nothing allocated or used", b.Name)
			}
			l.free = o
			continue
		}
		for _, a := range o.Access {
			if !a.Buf.Temporary {
				continue
			}
			l := &lives[a.Buf.ID]
			if l.free != nil {
				bad(o, "move the free after the last use", "uses %s after %s freed it", a.Buf.Name, l.free.Name)
			}
			if l.first < 0 {
				l.first = i
			}
			l.last = i
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	var before, after map[int][]*Op // op index -> allocs to insert before it, frees after it
	added := 0
	for id := range lives {
		l := &lives[id]
		if l.first < 0 {
			continue
		}
		first := ops[l.first]
		b := first.bufferByID(id)
		if l.alloc == nil {
			if before == nil {
				before = map[int][]*Op{}
			}
			a := &Op{Kind: Alloc, Name: "alloc:" + b.Name, Access: []Access{{b.All(), Write}}, Device: b.Device, decl: first.decl}
			before[l.first] = append(before[l.first], a)
			added++
		}
		if l.free == nil {
			if after == nil {
				after = map[int][]*Op{}
			}
			f := &Op{Kind: Free, Name: "free:" + b.Name, Access: []Access{{b.All(), Write}}, Device: b.Device, decl: ops[l.last].decl}
			after[l.last] = append(after[l.last], f)
			added++
		}
	}
	if added == 0 {
		return ops, nil
	}
	out := make([]*Op, 0, len(ops)+added)
	for i, o := range ops {
		out = append(out, before[i]...)
		out = append(out, o)
		out = append(out, after[i]...)
	}
	return out, nil
}

func (o *Op) bufferByID(id int) *Buffer {
	for _, a := range o.Access {
		if a.Buf.ID == id {
			return a.Buf
		}
	}
	return nil
}

// LiveAtEnd lists the temporary buffers still allocated when the graph's
// last op is done: those an explicit Alloc allocates and no Free frees (a
// temporary that ops use gets a Free after its last use; one that only an
// Alloc names does not). Running such a graph more than once allocates them
// again while they are live, which backends refuse.
func (g *Graph) LiveAtEnd() []*Buffer {
	live := make(map[*Buffer]bool)
	var order []*Buffer
	for _, o := range g.Ops {
		switch o.Kind.Info().Lifetime {
		case Allocates:
			if b := o.Buffer(); b != nil {
				if _, seen := live[b]; !seen {
					order = append(order, b)
				}
				live[b] = true
			}
		case Frees:
			if b := o.Buffer(); b != nil {
				live[b] = false
			}
		}
	}
	var out []*Buffer
	for _, b := range order {
		if live[b] {
			out = append(out, b)
		}
	}
	return out
}
