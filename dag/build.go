package dag

import (
	"slices"
	"strconv"
)

// Graph is a checked set of buffers, kernels and operations with their
// dependencies. Ops are in a topological order: every Dep is smaller than
// the op's ID. Graphs are read-only once built.
type Graph struct {
	Buffers []*Buffer
	Kernels []*Kernel // the kernels the ops launch, builtins included
	Ops     []*Op
	// Nested are the ops of the bodies of loops and branches, of every
	// depth, in Walk's order; set on the graph Build returns, not on the
	// bodies themselves. See Op.Index.
	Nested []*Op
}

// OpAt returns the op whose Index is i, nil if none is.
func (g *Graph) OpAt(i int) *Op {
	switch {
	case i < 0:
		return nil
	case i < len(g.Ops):
		return g.Ops[i]
	case i-len(g.Ops) < len(g.Nested):
		return g.Nested[i-len(g.Ops)]
	}
	return nil
}

// Build checks the declarations and returns the graph with its dependencies.
// It reports every problem in one round, dependency cycles included: the
// error, if any, is an ErrorList in declaration order (see also Errors).
func (g *Builder) Build() (*Graph, error) {
	c := checker{b: g}
	if g.nestedIn == nil {
		c.buffers() // a body's are those of the graph around it
	}
	g.nameOps()
	c.ops()
	// Dependencies are inferred even when some ops are wrong, so that cycles
	// show up in the same round: ops with unusable accesses take part only
	// through their after edges, which can only hide cycles, never invent them.
	ops := g.ops
	if g.nestedIn == nil {
		// A body's temporaries live around the control op that runs it.
		var lifeErrs ErrorList
		ops, lifeErrs = withLifetimes(g.ops, len(g.bufs))
		c.errs = append(c.errs, lifeErrs...)
		if ops == nil {
			ops = g.ops
		}
	}
	for i, o := range ops {
		o.ID = i
	}
	if e := inferDeps(ops, len(g.bufs)); e != nil {
		c.errs = append(c.errs, e)
	} else {
		chainOrdered(ops)
		var cycles []*Error
		ops, cycles = addAfter(ops)
		c.errs = append(c.errs, cycles...)
	}
	if len(c.errs) == 0 && g.nestedIn == nil {
		c.errs = checkDefined(ops, g.bufs)
	}
	if len(c.errs) > 0 {
		// The builder's ops keep their declaration IDs for another Build.
		for i, o := range g.ops {
			o.ID = i
			o.Deps = nil
		}
		c.errs.Sort()
		return nil, c.errs
	}
	out := &Graph{Buffers: g.bufs, Kernels: g.usedKernels(ops), Ops: ops}
	if g.nestedIn == nil {
		for _, o := range ops {
			o.Index = o.ID
		}
		out.Walk(func(o *Op) {
			if o.Index < 0 {
				o.Index = len(ops) + len(out.Nested)
				out.Nested = append(out.Nested, o)
			}
		})
	} else {
		for _, o := range ops {
			o.Index = -1
		}
	}
	return out, nil
}

// nameOps names the ops declared without a name after their kind (or
// kernel) and declaration index.
func (g *Builder) nameOps() {
	buf := make([]byte, 0, 64)
	for i, o := range g.ops {
		if o.Name != "" {
			continue
		}
		buf = append(buf[:0], g.prefix...)
		if k := o.Kernel(); k != nil {
			buf = append(buf, k.Name...)
		} else {
			buf = append(buf, o.Kind.String()...)
		}
		o.Name = string(strconv.AppendInt(buf, int64(i), 10))
	}
}

func (g *Builder) usedKernels(ops []*Op) []*Kernel {
	var ks []*Kernel
	// A graph launches a few kernels, found in ks itself; past 16 a map
	// keeps a graph of thousands of kernels linear.
	var seen map[*Kernel]bool
	add := func(k *Kernel) {
		switch {
		case seen != nil && seen[k]:
			return
		case seen == nil && slices.Contains(ks, k):
			return
		}
		ks = append(ks, k)
		if seen != nil {
			seen[k] = true
		} else if len(ks) > 16 {
			seen = make(map[*Kernel]bool, len(g.kernels)+len(Builtins()))
			for _, k := range ks {
				seen[k] = true
			}
		}
	}
	for _, o := range ops {
		if k := o.Kernel(); k != nil {
			add(k)
		}
		for _, b := range o.Bodies() {
			for _, k := range b.Kernels {
				add(k)
			}
		}
	}
	return ks
}
