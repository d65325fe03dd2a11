package spec

// Recipes: a spec with parameters loaded again at other values of them
// (Spec.At, a shape a session runs) without reading its buffers and ops
// from the YAML again.

import (
	"fmt"
	"maps"
	"math"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dagrun/dagrun/dag"
)

// recipes are the buffers and ops of a spec's text as a load without
// errors read them, for the loads of the text at other values of its
// parameters: what of each declaration depends on no value, kept as read,
// and the numbers and views that may (leaves), kept to be evaluated at the
// new values with the checks the reading makes of them. What depends on no
// value was right at the first load and is right at every load, so a load
// from recipes reports what a load that reads the text would: what the
// values make wrong, which the leaves check. A load makes recipes only
// where every value read that depends on the parameters is a leaf
// (reader.valueReads) and every op's reader keeps a maker. Immutable once
// made: loads on several goroutines share them.
type recipes struct {
	params   []paramDeclared
	paramsN  *node // the params mapping
	bufs     []bufRecipe
	bufOrder []string
	ops      []opRecipe
	opNames  map[string]int32 // decls.opNames once the ops list is read
	accesses int              // of the ops, for dag.Builder.Grow
	leaves   int              // the most of one op
	decls    int              // ops of the list and of its bodies
	sites    *opSites         // Spec.ops
}

// bufRecipe is a buffer declaration: its size the leaf, the rest as read.
type bufRecipe struct {
	name   string
	keyN   *node
	fields fieldLocs
	size   leaf
	list   []dag.BufferOption
	set    []func(*dag.Buffer)
}

// opRecipe is an op of the ops list or of a body: its declaration as
// read, its leaves in the order read, what makes its op of their values,
// the options of every op it has (priority, cost, device, name), and the
// bodies of a loop or branch.
type opRecipe struct {
	info   opInfo
	leaves []leaf
	maker  opMaker
	opts   []dag.OpOption
	bodies []*bodyRecipe
}

// opMaker makes the op of a kind from the values of its leaves, in the
// order read; nil where a value makes it impossible (the buffer of an
// alloc that is wrong at these values), as its reader would.
type opMaker interface {
	make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op
}

// leaf is a number or a view of a declaration whose value may depend on
// the parameters: what reading it leaves for evaluating it at other
// values. A load evaluates every leaf of every declaration: what it needs
// for a right value is kept here, compact, and what it needs to report a
// wrong one apart (site).
type leaf struct {
	num  num       // a number
	view *viewLeaf // a view; nil for a number
	// A number passes its check when it is in [lo, hi] (numCheck.bounds),
	// and is then worth mul times itself.
	lo, hi, mul int64
	site        *leafSite
}

// leafSite is where and how a leaf's reader reports it: at n (resolved)
// as what, and what its check is.
type leafSite struct {
	what  subject
	n     *node
	check numCheck
}

// newLeaf is the leaf of number x or view v (nil for a number), read at n
// for what and checked with c.
func newLeaf(what subject, n *node, x num, v *viewLeaf, c numCheck) leaf {
	lo, hi, mul := c.bounds()
	return leaf{num: x, view: v, lo: lo, hi: hi, mul: mul, site: &leafSite{what: what, n: n, check: c}}
}

// leafValue is the value of a leaf: a number, or a view and its mode.
type leafValue struct {
	n    int64
	view dag.View
	mode dag.Mode
}

// num is a whole number as written: a constant, or an expression of the
// parameters (read as a size where units is set).
type num struct {
	e     expr // nil: the constant c
	c     int64
	s     string // e's text, for messages
	units bool
	rank  bool // e is a collective's peer, of rank and world too (opReader.peerVal)
}

// viewLeaf is a view as written: a text ("x[0:T*4KiB]", x) or a mapping
// {buffer, offset, size, mode}.
type viewLeaf struct {
	text   bool
	s      string // the text
	place  int32  // the buffer's declaration's place (views.decls)
	ranged bool   // the text has brackets
	lo, hi bound  // the text's start and end
	// The mapping, and its offset and size where given.
	mapN          *node
	off, size     num
	offN, sizeN   *node
	hasOff, hasSz bool
	mode          dag.Mode
}

// bound is a view's start or end, as written in its text (trimmed).
type bound struct {
	num
	given bool
}

// numCheck is what a number must be beyond a number: a check of its
// reader, with where (n) and how (what) the reader reports it.
type numCheck struct {
	kind   checkKind
	n      *node
	what   subject
	lo, hi int64         // checkRange's bounds
	key    string        // checkPositive's key
	dt     dag.DType     // checkCount's element type
	param  dag.ParamKind // checkFits's parameter type
}

// checkKind is what a numCheck checks; the zero kind checks nothing.
type checkKind uint8

const (
	checkRange      checkKind = iota + 1 // in [lo, hi], as intIn reads
	checkPositive                        // 1 or more: a GEMM's leading dimension, batch or stride
	checkSize                            // a buffer's size, positive
	checkCount                           // a buffer's count of elements of dt; its value becomes their bytes
	checkShared                          // a launch's dynamic shared memory
	checkFits                            // a launch's integer argument, in its parameter's type
	checkIterations                      // a loop's max, in [1, dag.MaxIterations]
)

// bounds are the values that pass c, [lo, hi], and what the reader keeps
// of them: mul times the value.
func (c *numCheck) bounds() (lo, hi, mul int64) {
	lo, hi, mul = math.MinInt64, math.MaxInt64, 1
	switch c.kind {
	case checkRange:
		lo, hi = c.lo, c.hi
	case checkPositive, checkSize:
		lo = 1
	case checkCount:
		lo, hi, mul = 1, math.MaxInt64/c.dt.Size(), c.dt.Size()
	case checkShared:
		hi = 1 << 30
	case checkIterations:
		lo, hi = 1, dag.MaxIterations
	case checkFits:
		if c.param != dag.I64Param {
			lo, hi = -1<<31, 1<<31-1
		}
	}
	return lo, hi, mul
}

// apply checks v as c says, reporting what is wrong as the readers do,
// and returns the value the reader keeps.
func (c *numCheck) apply(r *reader, v int64) (int64, bool) {
	switch c.kind {
	case checkRange:
		if v < c.lo || v > c.hi {
			r.errorf(c.n, fmt.Sprintf("use %d to %d", c.lo, c.hi), "%s %d is out of range", c.what, v)
			return v, false
		}
	case checkPositive:
		if v < 1 {
			hint := "leave it out for the default"
			if c.key[0] == 's' {
				hint = "leave it out to pack the batch's matrices one after another"
			}
			r.errorf(c.n, hint, "%s %s %d is not positive", c.what, c.key, v)
			return v, false
		}
	case checkSize:
		if v <= 0 {
			r.errorf(c.n, sizeHint, "%s size %d is not positive", c.what, v)
			return v, false
		}
	case checkCount:
		switch {
		case v <= 0:
			r.errorf(c.n, "", "%s count %d is not positive", c.what, v)
			return v, false
		case v > math.MaxInt64/c.dt.Size():
			r.errorf(c.n, "", "%s count %d is too large", c.what, v)
			return v, false
		}
		return v * c.dt.Size(), true
	case checkShared:
		if v > 1<<30 {
			r.errorf(c.n, "use at most 48 KiB of dynamic shared memory", "%s shared %d bytes is too large", c.what, v)
			return v, false
		}
	case checkIterations:
		if v < 1 || v > dag.MaxIterations {
			hint := fmt.Sprintf("bound the loop between 1 and %d iterations, or leave max out", int64(dag.MaxIterations))
			r.errorf(c.n, hint, "%s max %d is out of range", c.what, v)
			return v, false
		}
	case checkFits:
		if lo, hi, _ := c.bounds(); v < lo || v > hi {
			r.errorf(c.n, "", "%s %d does not fit in %s", c.what, v, c.param)
			return v, false
		}
	}
	return v, true
}

// inRange is the check of intIn: in [lo, hi].
func inRange(n *node, what subject, lo, hi int64) numCheck {
	return numCheck{kind: checkRange, n: n, what: what, lo: lo, hi: hi}
}

// opRecording is what a load that keeps recipes keeps of the op being
// read, for its recipe: its leaves, maker, options and bodies.
type opRecording struct {
	leaves []leaf
	maker  opMaker
	opts   []dag.OpOption
	bodies []*bodyRecipe
}

// recorder collects a load's recipes while it reads (loader.rec).
type recorder struct {
	recipes
	bad bool // something was read that recipes cannot make again
}

// done returns the recipes recorded, or nil when they cannot stand for
// the text: the load's reads depend on the values beyond the leaves.
func (rc *recorder) done(valueReads int) *recipes {
	if rc == nil || rc.bad || valueReads != 0 {
		return nil
	}
	return &rc.recipes
}

// follow is n with aliases followed, as resolve follows them, without
// charging them again: for nodes a reader has already resolved.
func follow(n *node) *node {
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

// leafReader reads leaves, and evaluates them at a load's values; a
// collective's peer, at the spec's rank and world too.
type leafReader struct {
	*views
	spec *Spec
}

// numOf is the number at n, which integer (units: size) has read without
// error, as a leaf's number; false where it cannot be one.
func (lr leafReader) numOf(n *node, units bool) (num, *node, bool) {
	n = follow(n)
	switch {
	case n == nil:
		return num{}, nil, false
	case isIntNode(n):
		v, err := parseInt(n.Value)
		return num{c: v}, n, err == nil
	case isFloatNode(n):
		f, err := parseFloat(n.Value) // a whole one, as integer takes it
		return num{c: int64(f)}, n, err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63
	}
	s, isStr := scalarString(n)
	if !isStr {
		return num{}, nil, false
	}
	if units && !notSize(s) {
		if v, err := parseSize(s); err == nil {
			return num{c: v}, n, true
		}
	}
	e, handled, err := lr.params.parse(lr.exprs, s, units)
	if !handled || err != nil {
		return num{}, nil, false
	}
	return num{e: e, s: s, units: units}, n, true
}

// numAt is x's value at the load's values; a wrong one is reported at n
// as integer and size report it.
func (lr leafReader) numAt(x *num, n *node, what subject) (int64, bool) {
	if x.e == nil {
		return x.c, true
	}
	if x.rank {
		return lr.peerAt(x.e, n, what, x.s)
	}
	v, err := lr.params.value(x.e, x.units)
	if err != nil {
		lr.errorf(n, err.hint, "%s %s%s", what, clip(x.s), err.msg)
		return 0, false
	}
	return v, true
}

// boundOf is a view's start or end text s as viewBound reads it.
func (lr leafReader) boundOf(s string) (bound, bool) {
	if s == "" {
		return bound{}, true
	}
	b := bound{given: true}
	if !notSize(s) {
		if v, err := parseSize(s); err == nil {
			b.c = v
			return b, true
		}
	}
	e, handled, err := lr.params.parse(lr.exprs, s, true)
	if !handled || err != nil {
		return bound{}, false
	}
	b.e, b.s, b.units = e, s, true
	return b, true
}

// viewOf is the view at n, which readView has read without error, as a
// leaf's view.
func (lr leafReader) viewOf(n *node) (*viewLeaf, *node, bool) {
	n = follow(n)
	if n == nil {
		return nil, nil, false
	}
	if s, isStr := scalarString(n); isStr {
		name, ranged, lo, hi, err := viewParts(s)
		x := &viewLeaf{text: true, s: s, ranged: ranged}
		d := lr.bufs[name]
		if d == nil {
			return nil, nil, false
		}
		x.place = d.place
		var okL, okH bool
		x.lo, okL = lr.boundOf(lo)
		x.hi, okH = lr.boundOf(hi)
		return x, n, err == nil && okL && okH
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil, false
	}
	x := &viewLeaf{mapN: n}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := follow(n.Content[i]), follow(n.Content[i+1])
		if k == nil || v == nil {
			return nil, nil, false
		}
		var okV bool
		switch k.Value {
		case "buffer":
			var name string
			name, okV = scalarString(v)
			d := lr.bufs[name]
			okV = okV && d != nil
			if okV {
				x.place = d.place
			}
		case "offset":
			x.off, x.offN, okV = lr.numOf(v, true)
			x.hasOff = true
		case "size":
			x.size, x.sizeN, okV = lr.numOf(v, true)
			x.hasSz = true
		case "mode":
			var m string
			m, okV = scalarString(v)
			x.mode = parseMode(m)
		}
		ok = ok && okV
	}
	return x, n, ok
}

// viewAt is x's view at the load's values, read at n for what: what
// readView makes of it.
func (lr leafReader) viewAt(x *viewLeaf, n *node, what subject) (dag.View, dag.Mode, bool) {
	if !x.text {
		d := &lr.decls[x.place]
		ok := true
		off, size := int64(0), int64(-1)
		if x.hasOff {
			var okO bool
			off, okO = lr.numAt(&x.off, x.offN, what.and("offset"))
			ok = ok && okO
		}
		if x.hasSz {
			var okS bool
			size, okS = lr.numAt(&x.size, x.sizeN, what.and("size"))
			ok = ok && okS
		}
		if !ok || d.buf == nil {
			return dag.View{}, 0, false
		}
		v, okR := lr.mappedRange(x.mapN, what, d.buf, off, size)
		return v, x.mode, okR
	}
	start, okS := lr.boundAt(&x.lo, x, n, what, "start")
	if !okS {
		return dag.View{}, 0, false
	}
	end, okE := lr.boundAt(&x.hi, x, n, what, "end")
	if !okE {
		return dag.View{}, 0, false
	}
	d := &lr.decls[x.place]
	if d.buf == nil {
		return dag.View{}, 0, false
	}
	if !x.ranged {
		return d.buf.All(), 0, true
	}
	if !x.hi.given {
		end = d.buf.Size
	}
	v, ok := lr.checkRange(n, what, d.buf, start, end)
	return v, 0, ok
}

// boundAt is the value of b, x's start or end (which), at the load's
// values: 0 when not given.
func (lr leafReader) boundAt(b *bound, x *viewLeaf, n *node, what subject, which string) (int64, bool) {
	if b.e == nil {
		return b.c, true
	}
	v, err := lr.params.value(b.e, true)
	if err != nil {
		lr.errorf(n, viewHint, "%s: %v", what, boundError(x.s, which, boundExprError(b.s, err)))
		return 0, false
	}
	return v, true
}

// leafAt is the value of leaf x at the load's values.
func (lr leafReader) leafAt(x *leaf) (leafValue, bool) {
	if x.view != nil {
		v, m, ok := lr.viewAt(x.view, x.site.n, x.site.what)
		return leafValue{view: v, mode: m}, ok
	}
	v := x.num.c
	if x.num.e != nil {
		var ok bool
		if v, ok = lr.numAt(&x.num, x.site.n, x.site.what); !ok {
			return leafValue{}, false
		}
	}
	if v < x.lo || v > x.hi {
		v, ok := x.site.check.apply(lr.reader, v) // reports it
		return leafValue{n: v}, ok
	}
	return leafValue{n: v * x.mul}, true
}

// viewVal reads a view of op's as readView does, and keeps its value for
// the op's maker and, recording, its leaf. It returns the value's place.
func (rd *opReader) viewVal(n *node, what subject, withMode bool) (int, bool) {
	reads := rd.valueReads
	v, m, ok := rd.views.readView(n, what, withMode)
	rd.valueReads = reads // the leaf's
	if rd.rec != nil {
		x, at, okL := leafReader{rd.views, rd.spec}.viewOf(n)
		rd.keepLeaf(newLeaf(what, at, num{}, x, numCheck{}), ok && okL)
	}
	rd.vals = append(rd.vals, leafValue{view: v, mode: m})
	return len(rd.vals) - 1, ok
}

// numVal reads a number of an op's as integer (units: size) does, checks
// it with c and keeps it as viewVal keeps a view.
func (rd *opReader) numVal(n *node, what subject, units bool, c numCheck) (int, bool) {
	v, ok := rd.number64(n, what, units)
	if ok {
		v, ok = c.apply(rd.reader, v)
	}
	if rd.rec != nil {
		x, at, okL := leafReader{rd.views, rd.spec}.numOf(n, units)
		rd.keepLeaf(newLeaf(what, at, x, nil, c), ok && okL)
	}
	rd.vals = append(rd.vals, leafValue{n: v})
	return len(rd.vals) - 1, ok
}

// number64 is integer (units: size), not counted among the value reads:
// the caller keeps a leaf of it.
func (r *reader) number64(n *node, what subject, units bool) (int64, bool) {
	reads := r.valueReads
	defer func() { r.valueReads = reads }()
	if units {
		return r.size(n, what)
	}
	return r.integer(n, what)
}

// keepLeaf records x among the leaves of the op being read; ok false
// (a leaf wrong, or not one recipes know) leaves the load no recipes.
func (rd *opReader) keepLeaf(x leaf, ok bool) {
	if !ok {
		rd.rec.bad = true
	}
	rd.leaves = append(rd.leaves, x)
}

// again makes the op of r, declared as d, at the load's values, as
// reading it would.
func (rd *opReader) again(b *dag.Builder, r *opRecipe, d *opDecl) *dag.Op {
	if m, ok := r.maker.(launchMaker); ok && m.kernel(rd) == nil {
		return nil // its kernel's declaration is wrong: its reader stops there
	}
	rd.vals = rd.vals[:0]
	ok := true
	lr := leafReader{rd.views, rd.spec}
	for i := range r.leaves {
		v, okV := lr.leafAt(&r.leaves[i])
		ok = ok && okV
		rd.vals = append(rd.vals, v)
	}
	if m, isSave := r.maker.(saveMaker); isSave {
		ok = m.write(rd) && ok
	}
	if len(r.bodies) > 0 {
		return rd.controlAgain(b, r, d, ok)
	}
	if !ok {
		return nil
	}
	return r.maker.make(rd, b, rd.vals)
}

// declare makes the op of r, declared as d, at the load's values, as
// readOp reads it.
func (rd *opReader) declare(b *dag.Builder, r *opRecipe, d *opDecl) {
	op := rd.again(b, r, d)
	if op == nil {
		return
	}
	for _, o := range r.opts {
		op.With(o)
	}
	d.op = op
	if op.SyncCopy() {
		rd.decls.syncCopies = append(rd.decls.syncCopies, d)
	}
}

// buffersAgain declares the buffers of rs at the load's values, as
// buffers would.
func (l *loader) buffersAgain(rs *recipes) {
	l.views.bufOrder = rs.bufOrder
	l.views.bufs = make(map[string]*bufDecl, len(rs.bufs))
	l.b.Grow(len(rs.bufs), 0, 0)
	decls := make([]bufDecl, len(rs.bufs))
	l.views.decls = decls
	lr := leafReader{l.views, l.spec}
	for i := range rs.bufs {
		r, d := &rs.bufs[i], &decls[i]
		*d = bufDecl{node: r.keyN, fields: r.fields, place: int32(i)}
		l.views.bufs[r.name] = d
		if v, ok := lr.leafAt(&r.size); ok {
			l.views.declare(l.b, d, r.name, v.n, r.list, r.set)
		}
	}
}

// opsAgain declares the ops of rs at the load's values, as opList would.
func (l *loader) opsAgain(rs *recipes) {
	l.b.Grow(0, len(rs.ops), rs.accesses)
	l.kinds.vals = make([]leafValue, 0, rs.leaves)
	decls := make([]opDecl, len(rs.ops))
	l.decls.ops = make([]*opDecl, 0, rs.decls)
	l.decls.opNames, l.decls.namesShared = rs.opNames, true
	for i := range rs.ops {
		r, d := &rs.ops[i], &decls[i]
		d.opInfo = &r.info
		l.decls.ops = append(l.decls.ops, d)
		l.kinds.declare(l.b, r, d)
	}
}

// ownNames makes ds.opNames its own before it changes it: a load from
// recipes shares theirs.
func (ds *decls) ownNames() {
	if ds.namesShared {
		ds.opNames, ds.namesShared = maps.Clone(ds.opNames), false
	}
}
