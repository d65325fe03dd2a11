package dag

import "fmt"

// failer adapts c.fail to the check functions that take one op's fail.
func (c *checker) failer(o *Op) failFunc {
	return func(field, hint, format string, a ...any) { c.fail(o, field, hint, format, a...) }
}

// checkLifetimeOp: allocs and frees are for temporaries only.
func checkLifetimeOp(c *checker, o *Op) {
	if b := o.Buffer(); !b.Temporary {
		c.fail(o, "", "declare it temporary to allocate it inside the run", "%s of persistent buffer %s", o.Kind, b.Name)
	}
}

// checkCopy: equal sizes, disjoint ranges.
func checkCopy(c *checker, o *Op) {
	if src, dst := o.Access[0], o.Access[1]; src.Size != dst.Size {
		c.fail(o, "", "copy views of equal size", "copy of %d bytes from %s into %d bytes of %s", src.Size, src.View, dst.Size, dst.View)
	} else if src.Overlaps(dst.View) {
		c.fail(o, "", "copy between disjoint ranges", "source %s and destination %s overlap", src.View, dst.View)
	}
}

// checkFill: whole elements, and a value the element type holds.
func checkFill(c *checker, o *Op) {
	v := o.Access[0]
	es := v.Buf.DType.Size()
	if v.Offset%es != 0 || v.Size%es != 0 {
		c.fail(o, "", "fill whole elements", "view %s is not aligned to %s elements (%d bytes)", v.View, v.Buf.DType, es)
	}
	if msg := valueProblem(v.Buf.DType, o.FillValue); msg != "" {
		c.fail(o, "value", fmt.Sprintf("fill %s with a value %s holds", v.Buf.Name, v.Buf.DType), "fill value %s", msg)
	}
}

// checkHost: a function, and host memory only.
func checkHost(c *checker, o *Op) {
	if o.HostFunc == nil {
		c.fail(o, "", "", "host step has no function")
	}
	for _, a := range o.Access {
		if !a.Buf.Placement.Host() {
			c.fail(o, "", fmt.Sprintf("copy %s to a pinned host buffer first", a.Buf.Name),
				"host step uses device buffer %s", a.Buf.Name)
		}
	}
}
