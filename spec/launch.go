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
	k := dag.LookupBuiltin(name)
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
	grid, block := dag.Dim3{X: 1, Y: 1, Z: 1}, dag.Dim3{X: 256, Y: 1, Z: 1}
	if v, has := f.get("grid"); has {
		d.fields.set("grid", v)
		grid, ok = rd.dim3(v, what.and("grid"))
	}
	okB := true
	if v, has := f.get("block"); has {
		d.fields.set("block", v)
		block, okB = rd.dim3(v, what.and("block"))
	}
	shared := int64(0)
	okS := true
	if v, has := f.get("shared"); has {
		d.fields.set("shared", v)
		shared, okS = rd.size(v, what.and("shared"))
		if okS && shared > 1<<30 {
			rd.errorf(v, "use at most 48 KiB of dynamic shared memory", "%s shared %d bytes is too large", what, shared)
			okS = false
		}
	}
	early := false
	okE := true
	if v, has := f.get("early_launch"); has {
		d.fields.set("early_launch", v)
		early, okE = rd.boolean(v, what.and("early_launch"))
	}
	argsN, hasArgs := f.get("args")
	if hasArgs {
		d.fields.set("args", argsN)
	} else {
		argsN = f.node
	}
	var argBuf [8]any
	args, okA := rd.args(argBuf[:0], d, k, argsN, hasArgs, what)
	if !ok || !okB || !okS || !okE || !okA {
		return nil
	}
	op := b.Launch(k, grid, block, args...)
	op.Launch.Shared = int(shared)
	op.Launch.Early = early
	return op
}

func (rd *opReader) dim3(n *node, what subject) (dag.Dim3, bool) {
	const limit = 1<<31 - 1
	if !isSeq(n) {
		x, ok := rd.intIn(n, what, 1, limit)
		return dag.Dim3{X: x, Y: 1, Z: 1}, ok
	}
	items, _ := rd.sequence(n, what)
	if len(items) < 1 || len(items) > 3 {
		rd.errorf(n, "write a number or [x], [x, y] or [x, y, z]", "%s has %d dimensions", what, len(items))
		return dag.Dim3{}, false
	}
	dims := [3]int{1, 1, 1}
	ok := true
	for i, it := range items {
		v, okI := rd.intIn(it, what, 1, limit)
		dims[i] = v
		ok = ok && okI
	}
	return dag.Dim3{X: dims[0], Y: dims[1], Z: dims[2]}, ok
}

// args reads a launch's arguments, by parameter name (a mapping) or in
// order (a list), and appends them to dst as dag.Builder.Launch takes them.
func (rd *opReader) args(dst []any, d *opDecl, k *dag.Kernel, n *node, given bool, what subject) ([]any, bool) {
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
		if a == nil {
			if misspelt == nil || !misspelt[i] {
				rd.errorf(n, signature(k), "%s: missing argument %s (%s) of %s", what, p.Name, p.Kind, k.Name)
			}
			ok = false
			dst = append(dst, nil)
			continue
		}
		d.fields.set(fieldNames[i], a)
		aw := what.and("argument").and(p.Name)
		switch p.Kind {
		case dag.BufferParam:
			v, m, okV := rd.views.view(a, aw, true)
			mode := p.Mode
			if mode == 0 {
				mode = dag.ReadWrite
			}
			if m == 0 {
				m = mode
			}
			if okV && m == mode && v == v.Buf.All() {
				// What Launch makes of the buffer itself, without boxing
				// an Access (an allocation per argument).
				dst = append(dst, v.Buf)
			} else {
				dst = append(dst, dag.Access{View: v, Mode: m})
			}
			ok = ok && okV
		case dag.I32Param, dag.I64Param:
			lo, hi := int64(-1<<31), int64(1<<31-1)
			if p.Kind == dag.I64Param {
				lo, hi = -1<<63, 1<<63-1
			}
			v, okI := rd.integer(a, aw)
			if okI && (v < lo || v > hi) {
				rd.errorf(a, "", "%s %d does not fit in %s", aw, v, p.Kind)
				okI = false
			}
			dst = append(dst, v)
			ok = ok && okI
		default:
			v, okF := rd.number(a, aw)
			dst = append(dst, v)
			ok = ok && okF
		}
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
