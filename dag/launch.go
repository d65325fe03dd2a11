package dag

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Limits of a launch that hold on every CUDA device dagrun supports.
const (
	maxBlockThreads = 1024
	maxSharedBytes  = 48 << 10
)

// launch checks a kernel launch: the kernel, the launch shape, and every
// argument against its parameter.
func (c *checker) launch(o *Op) {
	l := o.Launch
	if l == nil || l.Kernel == nil {
		c.fail(o, "kernel", "name a builtin kernel or declare one", "launch has no kernel")
		return
	}
	k := l.Kernel
	if k.Source != Builtin && !slices.Contains(c.b.kernels, k) {
		c.fail(o, "kernel", "declare the kernel with Builder.Kernel", "kernel %s is not declared", k.Name)
	}
	shapeOK := true
	if d := l.Grid; d.X < 1 || d.Y < 1 || d.Z < 1 {
		c.fail(o, "grid", "every dimension is at least 1", "grid %s has a dimension below 1", d)
		shapeOK = false
	}
	if d := l.Block; d.X < 1 || d.Y < 1 || d.Z < 1 {
		c.fail(o, "block", "every dimension is at least 1", "block %s has a dimension below 1", d)
		shapeOK = false
	}
	// Each dimension is bounded before any product is taken, so no product
	// can wrap: a block holds at most 2^10 threads, a grid at most 2^63 blocks
	// is refused by the limits below before grid x block is formed.
	if b := l.Block; b.X > 1024 || b.Y > 1024 || b.Z > 64 || (shapeOK && b.Count() > maxBlockThreads) {
		c.fail(o, "block", "use at most 1024 threads per block (x, y <= 1024, z <= 64)", "block %s is too large", b)
		shapeOK = false
	}
	if gr := l.Grid; gr.X > 1<<31-1 || gr.Y > 65535 || gr.Z > 65535 {
		c.fail(o, "grid", "grid x <= 2^31-1, y and z <= 65535", "grid %s is too large", gr)
		shapeOK = false
	}
	if shapeOK {
		if _, ok := mulInt64(int64(l.Grid.X), int64(l.Grid.Y), int64(l.Grid.Z), int64(l.Block.Count())); !ok {
			c.fail(o, "grid", "launch fewer threads: the element loops stride over the grid", "grid %s of blocks %s is more than 2^63 threads", l.Grid, l.Block)
		}
	}
	if l.Shared < 0 || l.Shared > maxSharedBytes {
		c.fail(o, "shared", "use at most 48 KiB of dynamic shared memory", "%d bytes of shared memory", l.Shared)
	}
	more := o.extras()
	for _, e := range more.argErrs {
		field := "args"
		if e.Index < len(k.Params) {
			field = "args." + k.Params[e.Index].Name
		}
		c.add(&Error{Op: o.Name, Field: field, Msg: e.Error(), Err: e, decl: o.decl})
	}
	for _, e := range more.nameErrs {
		e.Op, e.decl = o.Name, o.decl
		c.add(e)
	}
	if len(more.argErrs) > 0 || len(more.nameErrs) > 0 {
		return
	}
	if len(l.Args) != len(k.Params) {
		names := make([]string, len(k.Params))
		for i, p := range k.Params {
			names[i] = p.Name + " " + p.Kind.String()
		}
		c.fail(o, "args", fmt.Sprintf("%s takes (%s)", k.Name, strings.Join(names, ", ")),
			"%d arguments for %d parameters", len(l.Args), len(k.Params))
		return
	}
	shapeArgs := true
	for i, p := range k.Params {
		if a := l.Args[i]; (p.Kind == BufferParam) != (a.Access >= 0) || a.Access >= len(o.Access) {
			shapeArgs = false
		}
	}
	if shapeArgs && k.Source == Builtin {
		// Half-precision buffers launch the builtin's f16/bf16 variant.
		if !builtinVariant(o, c.failer(o)) {
			return
		}
		k = l.Kernel
	}
	ok := true
	for i, p := range k.Params {
		a := l.Args[i]
		if (p.Kind == BufferParam) != (a.Access >= 0) || a.Access >= len(o.Access) {
			want := "a number"
			if p.Kind == BufferParam {
				want = "a buffer"
			}
			c.fail(o, "args."+p.Name, "", "parameter %s takes %s", p.Name, want)
			ok = false
			continue
		}
		if p.Kind != BufferParam {
			if msg := scalarProblem(p.Kind, a); msg != "" {
				c.fail(o, "args."+p.Name, "", "parameter %s: %s", p.Name, msg)
				ok = false
				continue
			}
			if p.Kind == I32Param && (a.Int < -1<<31 || a.Int > 1<<31-1) {
				c.fail(o, "args."+p.Name, "", "%d does not fit in i32", a.Int)
				ok = false
			}
			continue
		}
		acc := o.Access[a.Access]
		if acc.Buf.Placement != Device || acc.Buf.Device != o.Device {
			c.fail(o, "args."+p.Name, fmt.Sprintf("copy it to a buffer on device %d first", o.Device),
				"%s is %s memory, not memory of device %d", acc.Buf.Name, placeName(acc.Buf), o.Device)
			ok = false
		}
		if p.Mode != 0 && acc.Mode|p.Mode != acc.Mode {
			c.fail(o, "args."+p.Name, fmt.Sprintf("pass it as %s", p.Mode), "%s is passed as %s, but %s %s it", acc.View, acc.Mode, k.Name, modeVerb(p.Mode))
			ok = false
		}
		if es := k.ParamDType(i).Size(); k.Source == Builtin && (acc.Offset%es != 0 || acc.Size%es != 0) {
			c.fail(o, "args."+p.Name, fmt.Sprintf("%s works on %s elements here", k.Name, k.ParamDType(i)), "view %s is not a whole number of %s elements", acc.View, k.ParamDType(i))
			ok = false
		}
	}
	if !c.launchOverlaps(o) {
		ok = false
	}
	if ok && k.check != nil {
		if err := k.check(o); err != nil {
			c.fail(o, "args", "", "%v", err)
		}
	}
}

// launchOverlaps refuses arguments whose views share bytes, at least one
// of them written, unless the views are identical and the kernel works
// element by element (every builtin but reduce_sum and matmul, and every
// kernel of the user's, as before: in-place kernels are common). Partial
// overlaps make the result depend on the backend and the launch shape.
func (c *checker) launchOverlaps(o *Op) bool {
	l := o.Launch
	k := l.Kernel
	name := func(i int) string {
		if i < len(k.Params) {
			return k.Params[i].Name
		}
		return fmt.Sprintf("argument %d", i)
	}
	ok := true
	for i, x := range l.Args {
		if x.Access < 0 || x.Access >= len(o.Access) {
			continue
		}
		a := o.Access[x.Access]
		for j := i + 1; j < len(l.Args); j++ {
			y := l.Args[j]
			if y.Access < 0 || y.Access >= len(o.Access) {
				continue
			}
			b := o.Access[y.Access]
			if !a.Overlaps(b.View) || (!a.Mode.Writes() && !b.Mode.Writes()) {
				continue
			}
			if a.View == b.View && !k.noAlias {
				continue
			}
			field := "args." + name(j)
			if a.View == b.View {
				c.fail(o, field, fmt.Sprintf("give %s its own buffer", name(j)),
					"%s and %s are both %s, which %s writes: %s does not work in place", name(i), name(j), a.View, k.Name, k.Name)
			} else {
				c.fail(o, field, "pass disjoint views, or the same view where the kernel works in place",
					"%s (%s) and %s (%s) partly overlap, and one of them is written", name(i), a.View, name(j), b.View)
			}
			ok = false
		}
	}
	return ok
}

// scalarProblem says why a is not a value of a parameter of kind k, or ""
// when it is: integer parameters take whole numbers, f32 ones what does
// not round to an infinity.
func scalarProblem(k ParamKind, a Arg) string {
	switch k {
	case I32Param, I64Param:
		if a.Float != float64(a.Int) {
			return fmt.Sprintf("%v is not a whole number, and %s takes one", a.Float, k)
		}
	case F32Param:
		if !math.IsInf(a.Float, 0) && math.IsInf(float64(float32(a.Float)), 0) {
			return fmt.Sprintf("%g is beyond the largest f32 (%g)", a.Float, math.MaxFloat32)
		}
	}
	return ""
}
