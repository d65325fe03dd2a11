package spec

import (
	"maps"
	"slices"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dagrun/dagrun/dag"
)

// opDecl is one op of the ops list: its op, nil when the declaration is
// wrong, and what the declaration says.
type opDecl struct {
	op *dag.Op
	*opInfo
}

// opInfo is what an op's declaration says beside its op: a load from
// recipes shares the first load's.
type opInfo struct {
	kind   string
	label  string    // kernel or host step name, for generated op names
	fields fieldLocs // dag.Error fields ("after", "args.x", ...) -> where
	after  []*node
	at     loc   // where the op's mapping is written
	index  int32 // in the ops list
	named  bool  // the spec names it (validly, once)
}

// opReader reads the keys of each op kind (kindKeys' readFuncs) into an
// op of a builder.
type opReader struct {
	*reader
	*kernelSet
	spec     *Spec
	views    *views
	paths    *paths
	decls    *decls
	argNames map[*dag.Kernel][]string // argFields by kernel
	// The op being read: its leaves' values, in the order read (see
	// opMaker), and the bodies of a loop or branch (controlMaker); and,
	// when the load keeps recipes (rec), what its recipe keeps.
	vals  []leafValue
	fills []func(*dag.Builder)
	rec   *recorder
	opRecording
	// Room for a GEMM's options, reused from op to op.
	gemmPre, gemmOpts []dag.OpOption
	argScratch        []argMaker // a launch's arguments, likewise
	// body reads a body of a loop or branch (loader.body), whose ops are
	// read as the ops list's are.
	body func(d *opDecl, n *node, what subject, key string) (fill func(*dag.Builder), ok bool)
}

func (l *loader) opList(n *node) {
	items, ok := l.sequence(n, about("ops"))
	if ok && len(items) == 0 {
		l.errorf(n, "add copy, fill, launch, alloc, free or host steps", "ops is empty")
	}
	count := min(len(items), MaxOps)
	// The declarations and their field places come from two slabs: a few
	// allocations for the whole list rather than a few per op.
	l.decls.ops = make([]*opDecl, 0, count)
	decls, infos := make([]opDecl, count), make([]opInfo, count)
	for i := range decls {
		decls[i].opInfo = &infos[i]
	}
	// Nothing reads the list again, and declarations keep places rather
	// than nodes: each op's part of the tree can go once it is read,
	// unless an alias may reach the list, or At reads the tree again at
	// other values of the spec's parameters.
	release := n.Kind == yaml.SequenceNode && n.Anchor == "" && len(l.spec.Params) == 0
	used := 0 // decls taken: ops of bodies join l.decls.ops too, from decls of their own
	for i, it := range items {
		if i == MaxOps || len(l.decls.ops) >= MaxOps {
			l.errorf(it, "split the work into several specs", "the spec has more than %d ops", MaxOps)
			break
		}
		before := len(l.decls.ops)
		l.opDecl(i, it, &decls[used])
		if len(l.decls.ops) > before && l.decls.ops[before] == &decls[used] {
			used++
		}
		if release {
			items[i] = nil
		}
	}
	if l.rec != nil {
		l.rec.opNames = maps.Clone(l.decls.opNames)
	}
}

// recordOp keeps the recipe of d, an op of the ops list just read.
func (l *loader) recordOp(d *opDecl) {
	r, ok := l.recipeOf(d)
	if !ok {
		return
	}
	l.rec.ops = append(l.rec.ops, r)
	l.rec.accesses += cap(d.op.Access) // what the builder takes for them
}

// recipeOf is the recipe of d, an op just read, from what the reader
// kept of it; false, and the load keeps no recipes, where d is wrong or
// its reader keeps none.
func (l *loader) recipeOf(d *opDecl) (opRecipe, bool) {
	rd := l.kinds
	if d.op == nil || rd.maker == nil {
		l.rec.bad = true
		return opRecipe{}, false
	}
	r := opRecipe{info: *d.opInfo, leaves: slices.Clone(rd.leaves), maker: rd.maker, opts: slices.Clone(rd.opts), bodies: slices.Clone(rd.bodies)}
	l.rec.leaves = max(l.rec.leaves, len(r.leaves))
	l.rec.decls++
	return r, true
}

// opt applies option o to op (when there is one), keeping it for the
// op's recipe.
func (rd *opReader) opt(op *dag.Op, o dag.OpOption) {
	if op != nil {
		op.With(o)
	}
	if rd.rec != nil {
		rd.opts = append(rd.opts, o)
	}
}

// fieldsPerOp is how many field places an op's declaration is given room
// for in the slab; one with more takes its own.
const fieldsPerOp = 32

// opDecl reads the op at index i of the ops list (of l.ops, for an op of
// a body) into d, which joins l.ops when n is a mapping.
func (l *loader) opDecl(i int, n *node, d *opDecl) {
	// The mappings of one op are read and done with here: the next op
	// reuses their entries, which keeps the slab small and in the cache.
	slab, slabs := l.slab, l.slabs
	defer func() {
		if l.slabs != slabs {
			// The op took a slab of its own: the next ops reuse it whole,
			// rather than each making another.
			slab = l.slab[:0]
		}
		l.slab = slab
	}()
	what := opSubject(i)
	if b, ok := l.decls.bodies[d]; ok {
		what = about(b.path)
	}
	f, _ := l.entries(n, what)
	if f.node == nil {
		return
	}
	if cap(l.fieldSlab)-len(l.fieldSlab) < fieldsPerOp {
		// Room for 4 ops, doubling up to 64: see entries.
		l.fieldSlab = make([]fieldLoc, 0, min(64*fieldsPerOp, max(4*fieldsPerOp, 2*cap(l.fieldSlab))))
	}
	start := len(l.fieldSlab)
	d.op = nil
	*d.opInfo = opInfo{at: locOf(f.node), index: int32(i), fields: l.fieldSlab[start:start]}
	l.decls.ops = append(l.decls.ops, d)
	l.readOp(d, f, what)
	// The op's fields are set: close them off in the slab, so that the
	// next op's cannot overwrite them.
	if k := len(d.fields); k > 0 && &d.fields[0] == &l.fieldSlab[:start+1][start] {
		l.fieldSlab = l.fieldSlab[:start+k]
	}
	d.fields = d.fields[:len(d.fields):len(d.fields)]
	if l.rec != nil && l.nesting == 0 {
		l.recordOp(d)
	}
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
		case l.decls.opNamed(name) != nil:
			l.errorf(v, "give each op its own name", "op name %q is used twice; first at %s", name, l.posAt(l.decls.opNamed(name).at))
		default:
			if l.decls.opNames == nil {
				l.decls.opNames = map[string]int32{}
			}
			l.decls.opNames[name] = int32(len(l.decls.ops) - 1)
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
	rd := l.kinds
	rd.vals = rd.vals[:0]
	rd.opRecording = opRecording{leaves: rd.leaves[:0], opts: rd.opts[:0], bodies: rd.bodies[:0]}
	var op *dag.Op
	if e, ok := entryOf(d.kind); ok {
		op = e.read(l.kinds, l.b, d, f, kindNode, what)
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
		rd.opt(op, dag.Name(name))
	}
	d.op = op
	// Noted while the op is in the cache, for pageableCopies.
	if op.SyncCopy() {
		l.decls.syncCopies = append(l.decls.syncCopies, d)
	}
}

// common reads the keys every op may have and applies them to op (when it
// is not nil).
func (l *loader) common(d *opDecl, f fields, what subject, op *dag.Op) bool {
	ok := true
	if v, has := f.get("priority"); has {
		d.fields.set("priority", v)
		p, okP := l.priority(v, what.and("priority"))
		ok = ok && okP
		if okP {
			l.kinds.opt(op, p)
		}
	}
	if v, has := f.get("cost"); has {
		c, okC := l.duration(v, what.and("cost"))
		if okC && c > MaxCost {
			l.errorf(v, "give an estimate of at most 24h", "%s cost %s is more than 24h", what, c)
			okC = false
		}
		ok = ok && okC
		if okC {
			l.kinds.opt(op, dag.Cost(c))
		}
	}
	if v, has := f.get("device"); has {
		d.fields.set("device", v)
		dev, okD := l.intIn(v, what.and("device"), 0, 1<<16)
		okD = okD && l.placedInWorld(v, what)
		ok = ok && okD
		if okD {
			l.kinds.opt(op, dag.OnDevice(dev))
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
		p, ok := l.intIn(n, what, int64(dag.MinPriority), int64(dag.MaxPriority))
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
