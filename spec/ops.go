package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	yaml "go.yaml.in/yaml/v3"
)

// opDecl is one op of the ops list; op is nil when the declaration is wrong.
type opDecl struct {
	op     *dag.Op
	kind   string
	label  string    // kernel or host step name, for generated op names
	fields fieldLocs // dag.Error fields ("after", "args.x", ...) -> where
	after  []*node
	at     loc   // where the op's mapping is written
	index  int32 // in the ops list
	named  bool  // the spec names it (validly, once)
}

func (l *loader) opList(n *node) {
	items, ok := l.sequence(n, about("ops"))
	if ok && len(items) == 0 {
		l.errorf(n, "add copy, fill, launch, alloc, free or host steps", "ops is empty")
	}
	count := min(len(items), MaxOps)
	// The declarations and their field places come from two slabs: a few
	// allocations for the whole list rather than a few per op.
	l.ops = make([]*opDecl, 0, count)
	decls := make([]opDecl, count)
	// Nothing reads the list again, and declarations keep places rather
	// than nodes: each op's part of the tree can go once it is read,
	// unless an alias may reach the list.
	release := n.Kind == yaml.SequenceNode && n.Anchor == ""
	for i, it := range items {
		if i == MaxOps {
			l.errorf(it, "split the work into several specs", "the spec has more than %d ops", MaxOps)
			break
		}
		l.opDecl(i, it, &decls[len(l.ops)])
		if release {
			items[i] = nil
		}
	}
}

// fieldsPerOp is how many field places an op's declaration is given room
// for in the slab; one with more takes its own.
const fieldsPerOp = 32

// opDecl reads the op at index i of the ops list into d, which joins
// l.ops when n is a mapping.
func (l *loader) opDecl(i int, n *node, d *opDecl) {
	// The mappings of one op are read and done with here: the next op
	// reuses their entries, which keeps the slab small and in the cache.
	slab := l.slab
	defer func() { l.slab = slab }()
	what := opSubject(i)
	f, _ := l.entries(n, what)
	if f.node == nil {
		return
	}
	if cap(l.fieldSlab)-len(l.fieldSlab) < fieldsPerOp {
		l.fieldSlab = make([]fieldLoc, 0, 64*fieldsPerOp)
	}
	start := len(l.fieldSlab)
	*d = opDecl{at: locOf(f.node), index: int32(i), fields: l.fieldSlab[start:start]}
	l.ops = append(l.ops, d)
	l.readOp(d, f, what)
	// The op's fields are set: close them off in the slab, so that the
	// next op's cannot overwrite them.
	if k := len(d.fields); k > 0 && &d.fields[0] == &l.fieldSlab[:start+1][start] {
		l.fieldSlab = l.fieldSlab[:start+k]
	}
	d.fields = d.fields[:len(d.fields):len(d.fields)]
}

// readOp reads the keys of op d, whose mapping is f.
func (l *loader) readOp(d *opDecl, f fields, what subject) {
	var kinds [2]string
	nk := 0
	var present uint32 // bit i: the op has key opKindKeys[i]
	for _, e := range f.list {
		if k := slices.Index(opKindKeys, e.key); k >= 0 {
			present |= 1 << k
		}
	}
	for k, key := range opKindKeys {
		if present&(1<<k) != 0 && nk < len(kinds) {
			kinds[nk] = key
			nk++
		}
	}
	switch nk {
	case 0:
		l.checkKeys(f, what, anyOpKeys())
		l.errorf(f.node, "give it one of "+kindList, "%s has no kind", what)
		return
	case 1:
	default:
		l.errorf(f.keyNode(kinds[1]), "split it into one op per kind", "%s is both %s and %s", what, kinds[0], kinds[1])
		return
	}
	d.kind = kinds[0]
	if v, has := f.get("name"); has {
		name, okN := l.str(v, what.and("name"))
		switch {
		case !okN || !l.checkName(v, "op", name):
		case l.opNamed(name) != nil:
			l.errorf(v, "give each op its own name", "op name %q is used twice; first at %s", name, l.posAt(l.opNamed(name).at))
		default:
			if l.opNames == nil {
				l.opNames = map[string]int32{}
			}
			l.opNames[name] = int32(len(l.ops) - 1)
			d.named = true
			what = namedOpSubject(name)
		}
	}
	kindNode, _ := f.get(d.kind)
	step := ""
	if d.kind == "host" {
		s, okS := l.oneOf(kindNode, what.and("host step"), hostSteps)
		if !okS {
			return
		}
		step, d.label = s, s
	}
	l.checkKeys(f, what, l.opKeys(d.kind, step))
	var op *dag.Op
	switch d.kind {
	case "copy":
		op = l.copyOp(d, kindNode, what)
	case "fill":
		op = l.fillOp(d, kindNode, what)
	case "alloc", "free":
		op = l.lifetimeOp(d.kind, kindNode, what)
	case "launch":
		op = l.launchOp(d, f, kindNode, what)
	case "host":
		op = l.hostOp(step, f, what)
	case "gemm":
		op = l.gemmOp(d, kindNode, what)
	default:
		op = l.collectiveOp(d, d.kind, kindNode, what)
	}
	l.common(d, f, what, op)
	if op == nil {
		return
	}
	// The op joins the graph even when other fields of it are wrong, so
	// that the graph's own checks (cycles, above all) report in the same
	// round; the errors already found keep the spec from running.
	if d.named {
		v, _ := f.get("name")
		name, _ := scalarString(v)
		op.Named(name)
	}
	d.op = op
}

// common reads the keys every op may have and applies them to op (when it
// is not nil).
func (l *loader) common(d *opDecl, f fields, what subject, op *dag.Op) bool {
	ok := true
	if v, has := f.get("priority"); has {
		d.fields.set("priority", v)
		p, okP := l.priority(v, what.and("priority"))
		ok = ok && okP
		if okP && op != nil {
			op.WithPriority(p)
		}
	}
	if v, has := f.get("cost"); has {
		c, okC := l.duration(v, what.and("cost"))
		if okC && c > MaxCost {
			l.errorf(v, "give an estimate of at most 24h", "%s cost %s is more than 24h", what, c)
			okC = false
		}
		ok = ok && okC
		if okC && op != nil {
			op.Costs(c)
		}
	}
	if v, has := f.get("device"); has {
		d.fields.set("device", v)
		dev, okD := l.intIn(v, what.and("device"), 0, 1<<16)
		okD = okD && l.placedInWorld(v, what)
		ok = ok && okD
		if okD && op != nil {
			op.OnDevice(dev)
		}
	}
	if v, has := f.get("after"); has {
		d.fields.set("after", v)
		if _, isStr := scalarString(v); isStr {
			d.after = []*node{v}
		} else {
			items, okA := l.sequence(v, what.and("after"))
			ok = ok && okA
			d.after = items
		}
	}
	return ok
}

func (l *loader) priority(n *node, what subject) (dag.Priority, bool) {
	if isIntNode(n) {
		p, ok := l.intIn(n, what, -1<<20, 1<<20)
		return dag.Priority(p), ok
	}
	s, ok := l.str(n, what)
	if !ok {
		return 0, false
	}
	switch s {
	case "high":
		return dag.High, true
	case "normal":
		return dag.Normal, true
	case "low":
		return dag.Low, true
	}
	l.errorf(n, "use high, normal, low or an integer (higher runs first)", "%s %q is not valid", what, s)
	return 0, false
}

func (l *loader) copyOp(d *opDecl, n *node, what subject) *dag.Op {
	f, ok := l.mapping(n, what.and("copy"), copyKeys)
	if f.node == nil {
		return nil
	}
	from, hasFrom := f.get("from")
	to, hasTo := f.get("to")
	if !hasFrom || !hasTo {
		l.errorf(f.node, "write copy: {from: src, to: dst}", "%s copy needs from and to", what)
		return nil
	}
	d.fields.set("from", from)
	d.fields.set("to", to)
	src, _, okS := l.view(from, what.and("copy from"), false)
	dst, _, okD := l.view(to, what.and("copy to"), false)
	if !ok || !okS || !okD {
		return nil
	}
	return l.b.Copy(dst, src)
}

func (l *loader) fillOp(d *opDecl, n *node, what subject) *dag.Op {
	f, ok := l.mapping(n, what.and("fill"), fillKeys)
	if f.node == nil {
		return nil
	}
	bufN, hasBuf := f.get("buffer")
	valN, hasVal := f.get("value")
	if !hasBuf || !hasVal {
		l.errorf(f.node, "write fill: {buffer: x, value: 0}", "%s fill needs buffer and value", what)
		return nil
	}
	d.fields.set("buffer", bufN)
	d.fields.set("value", valN)
	v, _, okV := l.view(bufN, what.and("fill buffer"), false)
	x, okX := l.number(valN, what.and("fill value"))
	if !ok || !okV || !okX {
		return nil
	}
	return l.b.Fill(v, x)
}

func (l *loader) lifetimeOp(kind string, n *node, what subject) *dag.Op {
	d := l.bufferRef(n, what.and(kind))
	if d == nil || d.buf == nil {
		return nil
	}
	if kind == "alloc" {
		return l.b.Alloc(d.buf)
	}
	return l.b.Free(d.buf)
}

func (l *loader) launchOp(d *opDecl, f fields, n *node, what subject) *dag.Op {
	d.fields.set("kernel", n)
	name, ok := l.str(n, what.and("kernel"))
	if !ok {
		return nil
	}
	d.label = name
	k := dag.LookupBuiltin(name)
	if k == nil {
		kd := l.kernels[name]
		if kd == nil {
			var known []string
			for _, b := range dag.Builtins() {
				known = append(known, b.Name)
			}
			l.errorf(n, l.suggest(name, append(known, l.kernOrder...)), "%s launches unknown kernel %q", what, name)
			return nil
		}
		if k = kd.k; k == nil {
			return nil
		}
	}
	grid, block := dag.Dim3{X: 1, Y: 1, Z: 1}, dag.Dim3{X: 256, Y: 1, Z: 1}
	if v, has := f.get("grid"); has {
		d.fields.set("grid", v)
		grid, ok = l.dim3(v, what.and("grid"))
	}
	okB := true
	if v, has := f.get("block"); has {
		d.fields.set("block", v)
		block, okB = l.dim3(v, what.and("block"))
	}
	shared := int64(0)
	okS := true
	if v, has := f.get("shared"); has {
		d.fields.set("shared", v)
		shared, okS = l.size(v, what.and("shared"))
		if okS && shared > 1<<30 {
			l.errorf(v, "use at most 48 KiB of dynamic shared memory", "%s shared %d bytes is too large", what, shared)
			okS = false
		}
	}
	argsN, hasArgs := f.get("args")
	if hasArgs {
		d.fields.set("args", argsN)
	} else {
		argsN = f.node
	}
	var argBuf [8]any
	args, okA := l.args(argBuf[:0], d, k, argsN, hasArgs, what)
	if !ok || !okB || !okS || !okA {
		return nil
	}
	op := l.b.Launch(k, grid, block, args...)
	op.Launch.Shared = int(shared)
	return op
}

func (l *loader) dim3(n *node, what subject) (dag.Dim3, bool) {
	const limit = 1<<31 - 1
	if !isSeq(n) {
		x, ok := l.intIn(n, what, 1, limit)
		return dag.Dim3{X: x, Y: 1, Z: 1}, ok
	}
	items, _ := l.sequence(n, what)
	if len(items) < 1 || len(items) > 3 {
		l.errorf(n, "write a number or [x], [x, y] or [x, y, z]", "%s has %d dimensions", what, len(items))
		return dag.Dim3{}, false
	}
	dims := [3]int{1, 1, 1}
	ok := true
	for i, it := range items {
		v, okI := l.intIn(it, what, 1, limit)
		dims[i] = v
		ok = ok && okI
	}
	return dag.Dim3{X: dims[0], Y: dims[1], Z: dims[2]}, ok
}

// args reads a launch's arguments, by parameter name (a mapping) or in
// order (a list), and appends them to dst as dag.Builder.Launch takes them.
func (l *loader) args(dst []any, d *opDecl, k *dag.Kernel, n *node, given bool, what subject) ([]any, bool) {
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
			items, _ := l.sequence(n, what.and("args"))
			for i, it := range items {
				if i >= len(nodes) {
					l.errorf(it, signature(k), "%s passes %d arguments to %s, which takes %d", what, len(items), k.Name, len(nodes))
					ok = false
					break
				}
				nodes[i] = it
			}
		} else {
			f, okF := l.entries(n, what.and("args"))
			ok = okF
			for _, e := range f.list {
				i := slices.IndexFunc(k.Params, func(p dag.Param) bool { return p.Name == e.key })
				if i < 0 {
					hint, meant := l.suggestParam(e.key, k)
					l.errorf(e.keyN, hint, "%s has no parameter %q", k.Name, e.key)
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
	fieldNames := l.argFields(k)
	for i, p := range k.Params {
		a := nodes[i]
		if a == nil {
			if misspelt == nil || !misspelt[i] {
				l.errorf(n, signature(k), "%s: missing argument %s (%s) of %s", what, p.Name, p.Kind, k.Name)
			}
			ok = false
			dst = append(dst, nil)
			continue
		}
		d.fields.set(fieldNames[i], a)
		aw := what.and("argument").and(p.Name)
		switch p.Kind {
		case dag.BufferParam:
			v, m, okV := l.view(a, aw, true)
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
			v, okI := l.integer(a, aw)
			if okI && (v < lo || v > hi) {
				l.errorf(a, "", "%s %d does not fit in %s", aw, v, p.Kind)
				okI = false
			}
			dst = append(dst, v)
			ok = ok && okI
		default:
			v, okF := l.number(a, aw)
			dst = append(dst, v)
			ok = ok && okF
		}
	}
	return dst, ok
}

// argFields are the field names dag's errors give k's arguments
// ("args.x"), made once per kernel.
func (l *loader) argFields(k *dag.Kernel) []string {
	if names, ok := l.argNames[k]; ok {
		return names
	}
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = "args." + p.Name
	}
	if l.argNames == nil {
		l.argNames = map[*dag.Kernel][]string{}
	}
	l.argNames[k] = names
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

func (l *loader) suggestParam(got string, k *dag.Kernel) (hint string, meant int) {
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = p.Name
	}
	if h := l.suggest(got, names); strings.HasPrefix(h, "did you mean") {
		best, _ := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(h, "did you mean "), "?"))
		return h, slices.Index(names, best)
	}
	return signature(k), -1
}

// view reads a view of a buffer: "name", "name[start:end]" or a mapping
// {buffer, offset, size} (with mode, for kernel arguments). The mode is 0
// when the spec does not give one.
func (l *loader) view(n *node, what subject, withMode bool) (dag.View, dag.Mode, bool) {
	n = l.resolve(n)
	if n == nil {
		return dag.View{}, 0, false
	}
	if s, isStr := scalarString(n); isStr {
		t, err := parseViewText(s)
		if err != nil {
			l.errorf(n, viewHint, "%s: %v", what, err)
			return dag.View{}, 0, false
		}
		b := l.viewBuffer(n, what, t.name)
		if b == nil {
			return dag.View{}, 0, false
		}
		if !t.ranged {
			return b.All(), 0, true
		}
		end := b.Size
		if t.hasEnd {
			end = t.end
		}
		v, ok := l.checkRange(n, what, b, t.start, end)
		return v, 0, ok
	}
	keys := viewKeys
	if !withMode {
		keys = viewKeys[:3]
	}
	f, ok := l.mapping(n, what, keys)
	if f.node == nil {
		return dag.View{}, 0, false
	}
	bufN, has := f.get("buffer")
	if !has {
		l.errorf(f.node, "write {buffer: x, offset: 0, size: 1KiB}", "%s has no buffer", what)
		return dag.View{}, 0, false
	}
	name, okN := l.str(bufN, what.and("buffer"))
	if !okN {
		return dag.View{}, 0, false
	}
	b := l.viewBuffer(bufN, what, name)
	off, size := int64(0), int64(-1)
	if v, has := f.get("offset"); has {
		var okO bool
		off, okO = l.size(v, what.and("offset"))
		ok = ok && okO
	}
	if v, has := f.get("size"); has {
		var okS bool
		size, okS = l.size(v, what.and("size"))
		ok = ok && okS
	}
	var mode dag.Mode
	if v, has := f.get("mode"); has {
		m, okM := l.oneOf(v, what.and("mode"), modes)
		ok = ok && okM
		mode = parseMode(m)
	}
	if b == nil || !ok {
		return dag.View{}, 0, false
	}
	end := b.Size
	if size >= 0 {
		end = off + size
		if end < off {
			l.errorf(f.node, "", "%s range overflows", what)
			return dag.View{}, 0, false
		}
	}
	v, okR := l.checkRange(f.node, what, b, off, end)
	return v, mode, okR
}

// viewBuffer is the buffer a view names, or nil (reported) when there is
// none.
func (l *loader) viewBuffer(n *node, what subject, name string) *dag.Buffer {
	if !isName(name) {
		l.errorf(n, viewHint, "%s: %q is not a buffer name", what, name)
		return nil
	}
	d := l.bufs[name]
	if d == nil {
		l.errorf(n, l.suggest(name, l.bufOrder), "%s names unknown buffer %q", what, name)
		return nil
	}
	return d.buf
}

func (l *loader) checkRange(n *node, what subject, b *dag.Buffer, start, end int64) (dag.View, bool) {
	if start <= b.Size && end <= b.Size && start < end {
		return b.Slice(start, end-start), true
	}
	hint := fmt.Sprintf("%s holds bytes [0:%d)", b.Name, b.Size)
	if start > b.Size || end > b.Size {
		l.errorf(n, hint, "%s range [%d:%d) is out of range", what, start, end)
	} else {
		l.errorf(n, hint, "%s range [%d:%d) is empty", what, start, end)
	}
	return dag.View{}, false
}

func (l *loader) hostOp(step string, f fields, what subject) *dag.Op {
	what = what.and(step)
	need := func(key, example string) (*node, bool) {
		v, has := f.get(key)
		if !has && !f.has(key) {
			l.errorf(f.node, "write "+example, "%s needs %s", what, key)
		}
		return v, has
	}
	switch step {
	case "checksum":
		n, ok := need("reads", "reads: [buffer, ...]")
		if !ok {
			return nil
		}
		items := []*node{n}
		if isSeq(n) {
			items, _ = l.sequence(n, what.and("reads"))
		}
		if len(items) == 0 {
			l.errorf(n, "name the buffers to check", "%s reads nothing", what)
			return nil
		}
		var acc []dag.Access
		var views []dag.View
		for _, it := range items {
			v, _, okV := l.view(it, what.and("reads"), false)
			ok = ok && okV
			acc = append(acc, dag.In(v))
			views = append(views, v)
		}
		if !ok {
			return nil
		}
		return l.b.Host(l.spec.checksumStep(views), acc...)
	case "save":
		bufN, okB := need("buffer", "buffer: x")
		pathN, okP := need("path", "path: out.bin")
		if !okB || !okP {
			return nil
		}
		v, _, okV := l.view(bufN, what.and("buffer"), false)
		p, okS := l.str(pathN, what.and("path"))
		if okS && p == "" {
			l.errorf(pathN, "name a file", "%s path is empty", what)
			okS = false
		}
		if okS {
			p, okS = l.writePath(pathN, what.and("path"), p)
		}
		if !okV || !okS {
			return nil
		}
		op := l.b.Host(l.spec.saveStep(p), dag.In(v))
		l.spec.Saves = append(l.spec.Saves, SaveStep{Op: op, View: v, Path: p})
		return op
	default: // add
		bufN, okB := need("buffer", "buffer: x")
		valN, okV := need("value", "value: 1")
		if !okB || !okV {
			return nil
		}
		v, _, okW := l.view(bufN, what.and("buffer"), false)
		x, okX := l.number(valN, what.and("value"))
		if !okW || !okX {
			return nil
		}
		return l.b.Host(addStep(v.Buf.DType, x), dag.InOut(v))
	}
}

// opNamed is the declaration of the op called name, or nil: one the spec
// names, else one whose made-up name it is.
func (l *loader) opNamed(name string) *opDecl {
	if i, ok := l.opNames[name]; ok {
		if int(i) < len(l.ops) { // opSites adds names beyond
			return l.ops[i]
		}
		return nil
	}
	i, ok := madeUp(name, len(l.ops), func(i int) bool {
		d := l.ops[i]
		return !d.named && d.op != nil && d.op.Name == name
	})
	if !ok {
		return nil
	}
	return l.ops[i]
}

// madeUp finds the op whose made-up name is name among n ops, is telling
// whether op i is called name. nameOps makes a name of a base and the op's
// index, with _2, _3, ... after it when that is taken, so the digits at the
// end of name, before an _N, say which ops it can be. Names being unique,
// the op called name is the one whatever the base. Made-up names are found
// this way, rather than kept in a map, because a spec may have millions.
func madeUp(name string, n int, is func(i int) bool) (int, bool) {
	stem := name
	for range 2 {
		j := len(stem)
		for j > 0 && stem[j-1] >= '0' && stem[j-1] <= '9' {
			j--
		}
		for k := len(stem) - 1; k >= j && len(stem)-k <= 10; k-- {
			if digits := stem[k:]; len(digits) == 1 || digits[0] != '0' {
				if i, err := strconv.Atoi(digits); err == nil && i < n && is(i) {
					return i, true
				}
			}
		}
		// Without an _N after the index, and look again.
		u := strings.LastIndexByte(stem, '_')
		if u < 0 || j != u+1 || j == len(stem) {
			break
		}
		stem = stem[:u]
	}
	return 0, false
}

// nameOps gives every op without a name one made from its kind (or kernel
// or host step) and its index, unique among the names the spec gives and
// the names made before.
func (l *loader) nameOps() {
	var buf []byte
	for i, d := range l.ops {
		if d.op == nil || d.op.Name != "" {
			continue
		}
		base := d.kind
		if d.label != "" {
			base = d.label
		}
		buf = strconv.AppendInt(append(buf[:0], base...), int64(i), 10)
		name := string(buf)
		if l.opNamed(name) != nil {
			base = name
			for n := 2; l.opNamed(name) != nil; n++ {
				name = fmt.Sprintf("%s_%d", base, n)
			}
		}
		d.op.Named(name)
	}
}

// addAfter adds the after edges. The names of every declaration are
// checked, wrong ones too, so that a misspelt name comes in the first
// round; and since a wrong op is not in the graph, whose check would find
// its cycles, the after edges through wrong ops are checked for cycles
// here.
func (l *loader) addAfter() {
	var names []string  // for suggestions, made on the first unknown name
	var edges [][]int32 // declaration -> the declarations it is after
	failed := false
	for i, d := range l.ops {
		failed = failed || d.op == nil
		for _, n := range d.after {
			name, ok := l.str(n, about("after"))
			if !ok {
				continue
			}
			p := l.opNamed(name)
			if p == nil {
				if l.wrongUnnamed(name) {
					continue // a made-up name of a wrong op: its error is reported
				}
				if names == nil {
					for _, d := range l.ops {
						if d.op != nil {
							names = append(names, d.op.Name)
						}
					}
				}
				l.errorf(n, l.suggest(name, names), "after names unknown op %q", name)
				continue
			}
			if edges == nil {
				edges = make([][]int32, len(l.ops))
			}
			edges[i] = append(edges[i], p.index)
			if d.op != nil && p.op != nil {
				d.op.After(p.op)
			}
		}
	}
	if failed && edges != nil {
		l.afterCycles(edges)
	}
}

// wrongUnnamed reports whether name is the name an unnamed op that is
// wrong would have been given.
func (l *loader) wrongUnnamed(name string) bool {
	_, ok := madeUp(name, len(l.ops), func(i int) bool {
		d := l.ops[i]
		return !d.named && d.op == nil
	})
	return ok
}

// afterCycles reports the cycles of after edges that pass through a wrong
// op (the graph's check finds the others), one per strongly connected
// set of ops, at the after of its first op.
func (l *loader) afterCycles(edges [][]int32) {
	var given map[int32]string // the names the spec gives, by declaration
	for _, scc := range stronglyConnected(edges) {
		if len(scc) == 1 && !slices.Contains(edges[scc[0]], scc[0]) {
			continue
		}
		wrong := false
		for _, i := range scc {
			wrong = wrong || l.ops[i].op == nil
		}
		if !wrong {
			continue
		}
		if given == nil {
			given = make(map[int32]string, len(l.opNames))
			for name, i := range l.opNames {
				given[i] = name
			}
		}
		name := func(d *opDecl) string {
			switch {
			case d.op != nil:
				return d.op.Name
			case d.named:
				return given[d.index]
			}
			return opIndex(int(d.index))
		}
		slices.Sort(scc)
		path := cyclePath(edges, scc)
		labels := make([]string, len(path))
		for i, d := range path {
			labels[i] = name(l.ops[d])
		}
		first := l.ops[path[0]]
		what := opIndex(int(first.index))
		if first.named {
			what = "op " + strconv.Quote(name(first))
		}
		l.errorf(first.after[0], "remove one of these after edges or reorder the operations",
			"%s: dependency cycle: %s", what, strings.Join(labels, " -> "))
	}
}

// cyclePath is a cycle through the strongly connected declarations scc
// (sorted), from its first back to it: a breadth-first search within scc.
func cyclePath(edges [][]int32, scc []int32) []int32 {
	start := scc[0]
	in := func(v int32) bool { _, ok := slices.BinarySearch(scc, v); return ok }
	prev := map[int32]int32{}
	queue := []int32{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range edges[v] {
			if w == start {
				path := []int32{start}
				for u := v; u != start; u = prev[u] {
					path = append(path, u)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if _, seen := prev[w]; !seen && in(w) {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int32{start, start}
}

// stronglyConnected returns the strongly connected components of the
// graph edges (Tarjan's algorithm, iterative: specs may be long chains).
func stronglyConnected(edges [][]int32) [][]int32 {
	n := len(edges)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct{ v, e int32 }
	for root := range int32(n) {
		if index[root] >= 0 {
			continue
		}
		calls := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if int(f.e) < len(edges[f.v]) {
				w := edges[f.v][f.e]
				f.e++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var scc []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					scc = append(scc, w)
					if w == v {
						break
					}
				}
				out = append(out, scc)
			}
		}
	}
	return out
}

// graphErrors positions the errors of dag.Builder.Build at the YAML nodes
// of the ops, buffers and kernels they name.
func (l *loader) graphErrors(err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			l.graphErrors(e)
		}
		return
	}
	e, ok := err.(*dag.Error)
	if !ok {
		if len(l.errs) == 0 {
			l.errorf(l.opsNode, "", "%v", err)
		}
		return
	}
	if len(l.errs) > 0 && l.mayFollow(e) {
		return
	}
	msg := l.relabel(e.Msg)
	switch {
	case e.Op != "":
		if d := l.opNamed(e.Op); d != nil {
			msg = l.label(d) + ": " + msg
		} else {
			msg = fmt.Sprintf("op %q: %s", e.Op, msg)
		}
	case e.Buffer != "":
		msg = fmt.Sprintf("buffer %q: %s", e.Buffer, e.Msg)
	case e.Kernel != "":
		msg = fmt.Sprintf("kernel %q: %s", e.Kernel, e.Msg)
	}
	l.errs = append(l.errs, &Error{Pos: l.posAt(l.locate(e)), Msg: msg, Hint: e.Hint})
}

// mayFollow reports whether a graph error may follow from the ops that
// are missing from the graph because their declarations are wrong: the
// lifetimes of temporary buffers depend on every op that uses them. Other
// problems of an op are its own.
func (l *loader) mayFollow(e *dag.Error) bool {
	if d := l.bufs[e.Buffer]; e.Buffer != "" && d != nil && d.buf != nil && d.buf.Temporary {
		return true
	}
	d := l.opNamed(e.Op)
	if d == nil || d.op == nil {
		return e.Op != ""
	}
	for _, a := range d.op.Access {
		if a.Buf.Temporary {
			return true
		}
	}
	return false
}

// relabel writes the made-up op names in a message of the graph as the
// spec's messages name those ops: ops[i].
func (l *loader) relabel(msg string) string {
	var b strings.Builder
	last := 0
	isNameByte := func(c byte) bool {
		return c == '_' || c == '-' || c == '.' || c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; i < len(msg); {
		if !isNameByte(msg[i]) {
			i++
			continue
		}
		j := i
		for j < len(msg) && isNameByte(msg[j]) {
			j++
		}
		word := strings.TrimRight(msg[i:j], ".:")
		if d := l.opNamed(word); d != nil && !d.named {
			b.WriteString(msg[last:i])
			b.WriteString(opIndex(int(d.index)))
			last = i + len(word)
		}
		i = j
	}
	if last == 0 {
		return msg
	}
	b.WriteString(msg[last:])
	return b.String()
}

// locate finds where a graph error is about: the field of the op,
// buffer or kernel it names, else the thing itself, else the ops list.
func (l *loader) locate(e *dag.Error) loc {
	if e.Op != "" {
		if d := l.opNamed(e.Op); d != nil {
			if at, ok := d.fields.get(e.Field); ok {
				return at
			}
			if at, ok := d.fields.get("args"); ok && strings.HasPrefix(e.Field, "args") {
				return at
			}
			return d.at
		}
		// The alloc and free the graph adds for a temporary buffer.
		for _, prefix := range []string{"alloc:", "free:"} {
			if name, ok := strings.CutPrefix(e.Op, prefix); ok && l.bufs[name] != nil {
				return locOf(l.bufs[name].node)
			}
		}
	}
	if d := l.bufs[e.Buffer]; e.Buffer != "" && d != nil {
		if at, ok := d.fields.get(e.Field); ok {
			return at
		}
		return locOf(d.node)
	}
	if d := l.kernels[e.Kernel]; e.Kernel != "" && d != nil {
		return locOf(d.node)
	}
	return locOf(l.opsNode)
}
