package spec

// Kernel launches: the kernel, its grid and block, and its arguments.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

func (rd *opReader) launchOp(b *dag.Builder, d *opDecl, f fields, n *node, what subject) *dag.Op {
	d.fields.set("kernel", n)
	name, ok := rd.str(n, what.and("kernel"))
	if !ok {
		return nil
	}
	d.label = name
	m := launchMaker{builtin: dag.LookupBuiltin(name), name: name, shared: -1}
	k := m.builtin
	if k == nil {
		kd := rd.kernels[name]
		if kd == nil {
			var known []string
			for _, b := range dag.Builtins() {
				known = append(known, b.Name)
			}
			rd.errorf(n, rd.suggest(name, append(known, rd.kernOrder...)), "%s launches unknown kernel %q", what, name)
			return nil
		}
		if k = kd.k; k == nil {
			return nil
		}
	}
	if v, has := f.get("grid"); has {
		d.fields.set("grid", v)
		m.grid, ok = rd.dim3(v, what.and("grid"))
	}
	okB := true
	if v, has := f.get("block"); has {
		d.fields.set("block", v)
		m.block, okB = rd.dim3(v, what.and("block"))
	}
	okS := true
	if v, has := f.get("shared"); has {
		d.fields.set("shared", v)
		m.shared, okS = rd.numVal(v, what.and("shared"), true, numCheck{kind: checkShared, n: v, what: what})
	}
	okE := true
	if v, has := f.get("early_launch"); has {
		d.fields.set("early_launch", v)
		m.early, okE = rd.boolean(v, what.and("early_launch"))
	}
	argsN, hasArgs := f.get("args")
	if hasArgs {
		d.fields.set("args", argsN)
	} else {
		argsN = f.node
	}
	var okA bool
	m.args, okA = rd.args(rd.argScratch[:0], d, k, argsN, hasArgs, what)
	rd.argScratch = m.args
	if rd.rec != nil {
		m.args = slices.Clone(m.args)
	}
	if !ok || !okB || !okS || !okE || !okA {
		return nil
	}
	return made(rd, b, m)
}

// launchMaker makes a launch of the builtin kernel, or of the kernel
// declared as name, with its grid, block, dynamic shared memory (the place
// of its value; -1: none) and arguments.
type launchMaker struct {
	builtin     *dag.Kernel
	name        string
	grid, block dims
	shared      int
	early       bool
	args        []argMaker
}

// argMaker is an argument of a launch: the place of a buffer's or an
// integer's value, or a float; a buffer's parameter's mode (ReadWrite
// where the kernel gives none).
type argMaker struct {
	kind dag.ParamKind
	slot int
	f    float64
	mode dag.Mode
}

// dims is a grid or block as read: the places of x, y and z (-1: 1);
// the launch's default where not given.
type dims struct {
	given bool
	slot  [3]int
}

// kernel is the kernel m launches, nil where its declaration is wrong.
func (m launchMaker) kernel(rd *opReader) *dag.Kernel {
	if m.builtin != nil {
		return m.builtin
	}
	if kd := rd.kernels[m.name]; kd != nil {
		return kd.k
	}
	return nil
}

func (m launchMaker) make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	var buf [8]any
	args := buf[:0]
	for _, a := range m.args {
		switch a.kind {
		case dag.BufferParam:
			x := v[a.slot]
			mode := x.mode
			if mode == 0 {
				mode = a.mode
			}
			if mode == a.mode && x.view == x.view.Buf.All() {
				// What Launch makes of the buffer itself, without boxing
				// an Access (an allocation per argument).
				args = append(args, x.view.Buf)
			} else {
				args = append(args, dag.Access{View: x.view, Mode: mode})
			}
		case dag.I32Param, dag.I64Param:
			args = append(args, v[a.slot].n)
		default:
			args = append(args, a.f)
		}
	}
	op := b.Launch(m.kernel(rd), m.grid.at(v, dag.Dim3{X: 1, Y: 1, Z: 1}), m.block.at(v, dag.Dim3{X: 256, Y: 1, Z: 1}), args...)
	if m.shared >= 0 {
		op.Launch.Shared = int(v[m.shared].n)
	}
	op.Launch.Early = m.early
	return op
}

// at is the dimensions of d's values v; def where d is not given.
func (d dims) at(v []leafValue, def dag.Dim3) dag.Dim3 {
	if !d.given {
		return def
	}
	x := [3]int{1, 1, 1}
	for i, s := range d.slot {
		if s >= 0 {
			x[i] = int(v[s].n)
		}
	}
	return dag.Dim3{X: x[0], Y: x[1], Z: x[2]}
}

func (rd *opReader) dim3(n *node, what subject) (dims, bool) {
	const limit = 1<<31 - 1
	d := dims{given: true, slot: [3]int{-1, -1, -1}}
	if !isSeq(n) {
		s, ok := rd.numVal(n, what, false, inRange(n, what, 1, limit))
		d.slot[0] = s
		return d, ok
	}
	items, _ := rd.sequence(n, what)
	if len(items) < 1 || len(items) > 3 {
		rd.errorf(n, "write a number or [x], [x, y] or [x, y, z]", "%s has %d dimensions", what, len(items))
		return dims{}, false
	}
	ok := true
	for i, it := range items {
		s, okI := rd.numVal(it, what, false, inRange(it, what, 1, limit))
		d.slot[i] = s
		ok = ok && okI
	}
	return d, ok
}

// args reads a launch's arguments, by parameter name (a mapping) or in
// order (a list), and appends them to dst, one per parameter of k.
func (rd *opReader) args(dst []argMaker, d *opDecl, k *dag.Kernel, n *node, given bool, what subject) ([]argMaker, bool) {
	var nodeBuf [8]*node
	nodes := nodeBuf[:0]
	if len(k.Params) > len(nodeBuf) {
		nodes = make([]*node, 0, len(k.Params))
	}
	nodes = nodes[:len(k.Params)]
	ok := true
	var misspelt []bool // parameters that a misspelt argument's error names
	if given {
		if isSeq(n) {
			items, _ := rd.sequence(n, what.and("args"))
			for i, it := range items {
				if i >= len(nodes) {
					rd.errorf(it, signature(k), "%s passes %d arguments to %s, which takes %d", what, len(items), k.Name, len(nodes))
					ok = false
					break
				}
				nodes[i] = it
			}
		} else {
			f, okF := rd.entries(n, what.and("args"))
			ok = okF
			for _, e := range f.list {
				i := slices.IndexFunc(k.Params, func(p dag.Param) bool { return p.Name == e.key })
				if i < 0 {
					hint, meant := rd.suggestParam(e.key, k)
					rd.errorf(e.keyN, hint, "%s has no parameter %q", k.Name, e.key)
					if meant >= 0 && misspelt == nil {
						misspelt = make([]bool, len(k.Params))
					}
					if meant >= 0 {
						misspelt[meant] = true // its error says it is missing
					}
					ok = false
					continue
				}
				nodes[i] = e.value
			}
		}
	}
	fieldNames := rd.argFields(k)
	for i, p := range k.Params {
		a := nodes[i]
		arg := argMaker{kind: p.Kind, slot: -1}
		if a == nil {
			if misspelt == nil || !misspelt[i] {
				rd.errorf(n, signature(k), "%s: missing argument %s (%s) of %s", what, p.Name, p.Kind, k.Name)
			}
			ok = false
			dst = append(dst, arg)
			continue
		}
		d.fields.set(fieldNames[i], a)
		aw := what.and("argument").and(p.Name)
		var okA bool
		switch p.Kind {
		case dag.BufferParam:
			arg.mode = p.Mode
			if arg.mode == 0 {
				arg.mode = dag.ReadWrite
			}
			arg.slot, okA = rd.viewVal(a, aw, true)
		case dag.I32Param, dag.I64Param:
			arg.slot, okA = rd.numVal(a, aw, false, numCheck{kind: checkFits, n: a, what: aw, param: p.Kind})
		default:
			arg.f, okA = rd.number(a, aw)
		}
		ok = ok && okA
		dst = append(dst, arg)
	}
	return dst, ok
}

// argFields are the field names dag's errors give k's arguments
// ("args.x"), made once per kernel.
func (rd *opReader) argFields(k *dag.Kernel) []string {
	if names, ok := rd.argNames[k]; ok {
		return names
	}
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = "args." + p.Name
	}
	if rd.argNames == nil {
		rd.argNames = map[*dag.Kernel][]string{}
	}
	rd.argNames[k] = names
	return names
}

// signature says what a kernel takes: "scale takes (x buffer inout, alpha f32)".
func signature(k *dag.Kernel) string {
	parts := make([]string, len(k.Params))
	for i, p := range k.Params {
		parts[i] = p.Name + " " + p.Kind.String()
		if p.Kind == dag.BufferParam && p.Mode != 0 {
			parts[i] += " " + p.Mode.String()
		}
	}
	return fmt.Sprintf("%s takes (%s)", k.Name, strings.Join(parts, ", "))
}

func (rd *opReader) suggestParam(got string, k *dag.Kernel) (hint string, meant int) {
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = p.Name
	}
	if h := rd.suggest(got, names); strings.HasPrefix(h, "did you mean") {
		best, _ := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(h, "did you mean "), "?"))
		return h, slices.Index(names, best)
	}
	return signature(k), -1
}
