package dag

// CondSetter returns the op of a While's body that sets the loop's flag
// for the next test: a launch of the set_flag builtin (either dtype) at
// the body's top level, writing the element the loop reads (its flag view
// starts where Cond does, and set_flag writes flag[0]), that no other op
// of the body follows. No op then writes the flag after it (the writes
// would be ordered after it), nor changes the x it reads, so it may run
// last in every iteration and the flag it writes is the one the loop
// reads next: a backend may compute the loop's condition in that launch
// (the cuda backend does, with no condition kernel of its own). nil for
// an If, a While whose body ends otherwise, or before Build.
func (o *Op) CondSetter() *Op {
	c := o.Control
	if o.Kind != While || c == nil || c.Body == nil || len(c.Body.Ops) == 0 {
		return nil
	}
	ops := c.Body.Ops
	followed := make([]bool, len(ops))
	for _, op := range ops {
		for _, d := range op.Deps {
			if d >= 0 && int(d) < len(ops) {
				followed[d] = true
			}
		}
	}
	var last *Op
	for i, op := range ops {
		if followed[i] || !setsFlag(op, c.Cond) {
			continue
		}
		last = op
	}
	return last
}

// setsFlag reports whether op launches set_flag with its flag's first
// element at cond.
func setsFlag(op *Op, cond View) bool {
	l := op.Launch
	if op.Kind != Launch || l == nil || l.Kernel == nil || l.Kernel.Base() != SetFlag || len(l.Args) == 0 {
		return false
	}
	a := l.Args[0].Access
	if a < 0 || a >= len(op.Access) {
		return false
	}
	v := op.Access[a].View
	return v.Buf == cond.Buf && v.Offset == cond.Offset
}
