package dag

import (
	"errors"
	"fmt"
)

// ControlSpec is the control-flow part of a While or If operation: a body
// of operations that runs while (or once if) a flag in device memory is
// non-zero. The body is a graph of its own, planned on its own streams; to
// the graph around it the control op is one operation that reads the flag
// and accesses whatever its body accesses, so ops after it depend on what
// the body writes and the body follows whatever came before.
type ControlSpec struct {
	// Cond is the flag: one i32 element in device memory. A While runs its
	// body while the flag is non-zero, reading it before every iteration;
	// an If runs Body when it is non-zero and Else otherwise.
	Cond View
	// Max is the most iterations a While may run; 0 leaves it unbounded.
	// Reaching it with the flag still set fails the run, naming the loop.
	Max int64

	Body *Graph // the loop's body, or the branch taken when Cond is non-zero
	Else *Graph // If: the branch taken when Cond is zero; nil for none

	body, els *Builder // what the caller declared, built by Build
}

// MaxReached is the error of a While that ran its Max iterations with its
// flag still set, in the words every backend reports it in.
func (c *ControlSpec) MaxReached() error {
	if c.Max == 1 {
		return errors.New("the loop ran its one iteration (its max) and its flag is still set")
	}
	return fmt.Errorf("the loop ran its %d iterations (max) and its flag is still set", c.Max)
}

// MaxIterations bounds any While: a loop that meant to stop at a million
// iterations says so, and the counter on the device stays far from wrapping.
const MaxIterations = 1 << 40

// While declares a loop: the ops that body declares run, in order of
// their dependencies, while cond (one i32 element in device memory) is
// non-zero, cond being read before every iteration; the body usually
// updates it. For example:
//
//	b.While(flag.All(), func(body *dag.Builder) {
//		body.Launch(scale, grid, block, x, 0.5)
//		body.Launch(setFlag, dag.Grid1(1), dag.Threads(1), flag, x, 1e-3)
//	}, dag.AtMost(1000))
//
// A body's ops run on cond's device, and a body holds no allocs or frees
// (temporaries live in the graph around it) and no collectives (every rank
// issues them in one order); Build reports these at the op. What a
// backend's loops cannot hold beyond that is the backend's to say when a
// session opens (device.BodyChecker): the cuda backend's bodies are
// conditional nodes of a CUDA graph.
func (g *Builder) While(cond View, body func(b *Builder), opts ...OpOption) *Op {
	o := g.opOf(While, In(cond))
	o.Control = &ControlSpec{Cond: cond, body: g.nested(body)}
	return o.With(opts...)
}

// AtMost bounds a While to n iterations (ControlSpec.Max): reaching them
// with the flag still set fails the run, naming the loop.
func AtMost(n int64) OpOption {
	return kindOption("AtMost", func(o *Op) {
		if o.Control == nil {
			o.Control = &ControlSpec{}
		}
		o.Control.Max = n
	}, While)
}

// If declares a branch: the ops then declares run when cond (one i32
// element in device memory) is non-zero, those of otherwise (which may be
// nil) when it is zero.
func (g *Builder) If(cond View, then, otherwise func(b *Builder), opts ...OpOption) *Op {
	o := g.opOf(If, In(cond))
	o.Control = &ControlSpec{Cond: cond, body: g.nested(then)}
	if otherwise != nil {
		o.Control.els = g.nested(otherwise)
	}
	return o.With(opts...)
}

// nested is the builder of a body, its ops declared by fill.
func (g *Builder) nested(fill func(b *Builder)) *Builder {
	b := &Builder{nestedIn: g}
	if fill != nil {
		fill(b)
	}
	return b
}

// Bodies lists the graphs a control op runs: its body, then its else
// branch if it has one; nil for other kinds or before Build.
func (o *Op) Bodies() []*Graph {
	c := o.Control
	if c == nil || c.Body == nil {
		return nil
	}
	if c.Else != nil {
		return []*Graph{c.Body, c.Else}
	}
	return []*Graph{c.Body}
}

// checkControl builds the bodies of a While or If with the buffers and
// kernels of the graph around them, and gives the op the accesses of its
// flag and of everything its bodies access.
func checkControl(c *checker, o *Op) {
	ctl := o.Control
	if ctl == nil || ctl.body == nil {
		c.fail(o, "", "declare it with Builder.While or Builder.If", "%s has no body", o.Kind)
		return
	}
	cond := o.Access[0]
	if cond.View != ctl.Cond {
		// Build ran before: start again from the flag alone.
		cond = In(ctl.Cond)
	}
	o.Access = append(o.Access[:0:0], cond)
	b := cond.Buf
	switch {
	case b.DType != I32:
		c.fail(o, o.Kind.String(), fmt.Sprintf("declare %s as i32", b.Name), "the flag %s is %s, not i32", b.Name, b.DType)
	case cond.Size != 4 || cond.Offset%4 != 0:
		c.fail(o, o.Kind.String(), fmt.Sprintf("name one element, such as %s[0:4]", b.Name), "the flag is %d bytes at offset %d of %s, not one i32 element", cond.Size, cond.Offset, b.Name)
	case b.Placement != Device:
		c.fail(o, o.Kind.String(), "keep the flag in device memory, where the kernels that set it run", "the flag %s is in %s memory", b.Name, b.Placement)
	}
	if o.Kind.Info().Body == Branch && ctl.Max != 0 {
		c.fail(o, "max", "bound loops, not branches", "a branch has no iterations to bound")
	}
	if ctl.Max < 0 || ctl.Max > MaxIterations {
		c.fail(o, "max", fmt.Sprintf("bound the loop between 1 and %d iterations, or leave max out", int64(MaxIterations)), "max %d is out of range", ctl.Max)
	}
	ctl.Body, ctl.Else = nil, nil
	for i, nb := range []*Builder{ctl.body, ctl.els} {
		if nb == nil {
			continue
		}
		prefix := o.Name + "/"
		if i == 1 {
			prefix += "else/"
		}
		g := c.body(o, nb, prefix)
		if g == nil {
			continue
		}
		if i == 0 {
			ctl.Body = g
		} else {
			ctl.Else = g
		}
		for _, op := range g.Ops {
			o.Access = append(o.Access, op.Access...)
		}
	}
}

// body builds one body of control op o; nil when it has errors, which
// are c's, placed at o.
func (c *checker) body(o *Op, nb *Builder, prefix string) *Graph {
	if len(nb.bufs) > 0 {
		c.fail(o, "", "declare buffers before the "+o.Kind.String(), "its body declares buffer %s", nb.bufs[0].Name)
		return nil
	}
	// The body names its unnamed ops after the control op (and the else
	// branch's after "else"), so that they differ from those around it.
	nb.prefix = prefix
	nb.bufs, nb.kernels = c.b.bufs, c.b.kernels
	defer func() { nb.bufs = nil }()
	g, err := nb.Build()
	if err != nil {
		for _, e := range err.(ErrorList) {
			e.decl = o.decl
			c.add(e)
		}
		return nil
	}
	dev := o.Device
	if dev < 0 {
		dev = o.Access[0].Buf.Device
	}
	ok := true
	for _, op := range g.Ops {
		info := op.Kind.Info()
		why := ""
		switch {
		case info.Lifetime != NoLifetime:
			why = fmt.Sprintf("a %s body cannot hold a %s: a temporary lives from its alloc to its free in the graph around the %s, once", o.Kind, op.Kind, o.Kind)
		case info.Class == CollectiveClass:
			why = fmt.Sprintf("a %s body cannot hold a %s: every rank issues its collectives in one order, which passes decided by each rank's own flag could break", o.Kind, op.Kind)
		case op.Device != dev:
			why = fmt.Sprintf("it runs on device %d and the %s %s on device %d: a body runs on one device", op.Device, o.Kind, o.Name, dev)
		}
		if why != "" {
			c.add(&Error{Op: op.Name, Msg: why, Hint: "move it before or after the " + o.Kind.String() + " " + o.Name, decl: o.decl})
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return g
}

// Walk calls f on every op of g and of the bodies of its control ops,
// depth first, each body's ops after the op that runs them.
func (g *Graph) Walk(f func(*Op)) {
	for _, o := range g.Ops {
		f(o)
		for _, b := range o.Bodies() {
			b.Walk(f)
		}
	}
}
