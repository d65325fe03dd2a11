package spec

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
)

// gemmOp reads gemm: {a, b, c, m, n, k, ...} (see dag.GemmSpec). The keys
// are the field names of dag's errors, so Build's complaints about a
// GEMM land on the key they are about.
func (rd *opReader) gemmOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	what = what.and("gemm")
	f, ok := rd.mapping(n, what, gemmKeys)
	if f.node == nil {
		return nil
	}
	for _, e := range f.list {
		if e.value != nil {
			d.fields.set(e.key, e.value)
		}
	}
	if a, has := f.get("a"); has {
		d.fields.set("dtype", a) // a's dtype is the GEMM's
	}
	var missing []string
	for _, k := range []string{"a", "b", "c", "m", "n", "k"} {
		if !f.has(k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		rd.errorf(f.node, "write gemm: {a: A, b: B, c: C, m: M, n: N, k: K}", "%s needs %s", what, joinAnd(missing))
		return nil
	}
	m := gemmMaker{ld: [3]int{-1, -1, -1}, batch: [4]int{-1, -1, -1, -1}}
	for i, k := range []string{"a", "b", "c", "d", "bias"} {
		m.views[i] = -1
		if v, has := f.get(k); has {
			slot, okV := rd.viewVal(v, what.and(k), false)
			ok = ok && okV
			m.views[i] = slot
		}
	}
	for i, key := range []string{"m", "n", "k"} {
		v, _ := f.get(key)
		slot, okX := rd.numVal(v, what.and(key), false, numCheck{}) // dag checks the range, at this key
		ok = ok && okX
		m.dims[i] = slot
	}
	opts := rd.gemmPre[:0]
	flag := func(key string, opt func() dag.OpOption) {
		if v, has := f.get(key); has {
			on, okB := rd.boolean(v, what.and(key))
			ok = ok && okB
			if on {
				opts = append(opts, opt())
			}
		}
	}
	flag("trans_a", dag.TransA)
	flag("trans_b", dag.TransB)
	flag("tf32", dag.TF32)
	for _, p := range []struct {
		key string
		opt func(float64) dag.OpOption
	}{{"alpha", dag.Alpha}, {"beta", dag.Beta}} {
		if v, has := f.get(p.key); has {
			x, okX := rd.number(v, what.and(p.key))
			ok = ok && okX
			opts = append(opts, p.opt(x))
		}
	}
	m.pre, rd.gemmPre = opts, opts
	if rd.rec != nil {
		m.pre = slices.Clone(opts)
	}
	// Leading dimensions, the batch and strides: given ones are at least 1
	// (dag takes 0 as "the default", which a spec says by leaving the key out).
	pos := func(key string) int {
		v, has := f.get(key)
		if !has {
			return -1
		}
		slot, okX := rd.numVal(v, what.and(key), false, numCheck{kind: checkPositive, n: v, what: what, key: key})
		ok = ok && okX
		return slot
	}
	m.ld = [3]int{pos("lda"), pos("ldb"), pos("ldc")}
	m.batch = [4]int{pos("batch"), pos("stride_a"), pos("stride_b"), pos("stride_c")}
	// epilogue: bias_gelu, bias: b1. dag refuses a bias without an
	// epilogue that adds one, and the reverse, at the bias key.
	if v, has := f.get("epilogue"); has {
		name, okE := rd.oneOf(v, what.and("epilogue"), epilogues)
		ok = ok && okE
		e, _ := dag.ParseEpilogue(name)
		m.epi = dag.WithEpilogue(e)
		if okE && e.HasBias() && m.views[4] < 0 {
			rd.errorf(v, "name the vector it adds: bias: VIEW (n elements of the gemm's dtype)", "%s epilogue %s needs a bias", what, e)
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return made(rd, b, m)
}

// gemmMaker makes a GEMM. Its fields hold the places of its values: views
// a, b, c, d and bias, dimensions m, n and k, leading dimensions, batch and
// strides (-1: not given).
type gemmMaker struct {
	views [5]int
	dims  [3]int
	ld    [3]int
	batch [4]int
	pre   []dag.OpOption // trans_a, trans_b, tf32, alpha and beta's options, as read
	epi   dag.OpOption   // the epilogue's; nil when not given
}

func (m gemmMaker) make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	at := func(i int) int64 {
		if i < 0 {
			return 0
		}
		return v[i].n
	}
	// The options in the order the reader gives them.
	opts := append(rd.gemmOpts[:0], m.pre...)
	if lda, ldb, ldc := at(m.ld[0]), at(m.ld[1]), at(m.ld[2]); lda != 0 || ldb != 0 || ldc != 0 {
		opts = append(opts, dag.LeadingDims(lda, ldb, ldc))
	}
	if n, sa, sb, sc := at(m.batch[0]), at(m.batch[1]), at(m.batch[2]), at(m.batch[3]); n != 0 || sa != 0 || sb != 0 || sc != 0 {
		opts = append(opts, dag.Batched(n, sa, sb, sc))
	}
	if m.views[3] >= 0 {
		opts = append(opts, dag.Output(v[m.views[3]].view))
	}
	if m.epi != nil {
		opts = append(opts, m.epi)
	}
	if m.views[4] >= 0 {
		opts = append(opts, dag.Bias(v[m.views[4]].view))
	}
	shape := dag.GemmShape{M: v[m.dims[0]].n, N: v[m.dims[1]].n, K: v[m.dims[2]].n}
	op := b.Gemm(v[m.views[2]].view, v[m.views[0]].view, v[m.views[1]].view, shape, opts...)
	rd.gemmOpts = opts[:0]
	return op
}

// made makes the op of m from the values read, keeping m for the op's
// recipe.
func made[M opMaker](rd *opReader, b *dag.Builder, m M) *dag.Op {
	if rd.rec != nil {
		rd.maker = m
	}
	return m.make(rd, b, rd.vals)
}

// collectiveArgs are what a collective's mapping gave: its views by key
// (view, in, out), its reduction and its root or peer rank.
type collectiveArgs struct {
	view, in, out dag.View
	red           dag.Reduction
	rank          int
	split         int // all_reduce's split: N; 0 when not given
}

// collective is the reader of the collective kind that build declares.
func collective(build func(*dag.Builder, collectiveArgs) *dag.Op) readFunc {
	return func(rd *opReader, b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
		return rd.collectiveOp(b, d, n, what, build)
	}
}

// collectiveOp reads one of the collectives: all_reduce: {view, op},
// all_gather: {in, out}, reduce_scatter: {in, out, op}, broadcast: {view,
// root}, send: {view, to} and recv: {view, from}.
func (rd *opReader) collectiveOp(b *dag.Builder, d *opDecl, n *node, what subject, build func(*dag.Builder, collectiveArgs) *dag.Op) *dag.Op {
	kind := d.kind
	what = what.and(kind)
	keys := collectiveKeys[kind]
	f, ok := rd.mapping(n, what, keys)
	if f.node == nil {
		return nil
	}
	// dag reports problems of the views as a whole (sizes, dtypes,
	// placement) with no field: they land on the collective's mapping.
	d.fields.set("", f.node)
	for _, e := range f.list {
		if e.value != nil {
			d.fields.set(e.key, e.value)
		}
	}
	var missing []string
	for _, k := range keys {
		if k != "op" && k != "split" && !f.has(k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		rd.errorf(f.node, "write "+kind+": "+collectiveExample[kind], "%s needs %s", what, joinAnd(missing))
		return nil
	}
	m := collectiveMaker{build: build, views: [3]int{-1, -1, -1}, rank: -1, split: -1}
	for i, k := range []string{"view", "in", "out"} {
		if v, has := f.get(k); has {
			slot, okV := rd.viewVal(v, what.and(k), false)
			ok = ok && okV
			m.views[i] = slot
		}
	}
	m.red = dag.Sum
	if v, has := f.get("op"); has {
		s, okR := rd.oneOf(v, what.and("op"), reductions)
		ok = ok && okR
		m.red, _ = dag.ParseReduction(s)
	}
	for _, k := range []string{"root", "to", "from"} {
		if v, has := f.get(k); has {
			slot, okR := rd.peerVal(v, what.and(k))
			ok = ok && okR
			m.rank = slot
		}
	}
	if v, has := f.get("split"); has {
		slot, okS := rd.numVal(v, what.and("split"), false, inRange(v, what.and("split"), 1, dag.MaxSplit))
		ok = ok && okS
		m.split = slot
	}
	if !ok {
		return nil
	}
	return made(rd, b, m)
}

// collectiveMaker makes a collective with build: its fields hold the
// places of its values (views view, in and out, its rank and split; -1:
// not given) and its reduction.
type collectiveMaker struct {
	build       func(*dag.Builder, collectiveArgs) *dag.Op
	views       [3]int
	red         dag.Reduction
	rank, split int
}

func (m collectiveMaker) make(_ *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	a := collectiveArgs{red: m.red}
	for i, p := range []*dag.View{&a.view, &a.in, &a.out} {
		if s := m.views[i]; s >= 0 {
			*p = v[s].view
		}
	}
	if m.rank >= 0 {
		a.rank = int(v[m.rank].n)
	}
	if m.split >= 0 {
		a.split = int(v[m.split].n)
	}
	return m.build(b, a)
}

// collectiveExample is how each collective is written, for hints.
var collectiveExample = map[string]string{
	"all_reduce":     "{view: g, op: sum}",
	"all_gather":     "{in: shard, out: whole}",
	"reduce_scatter": "{in: whole, out: shard, op: sum}",
	"broadcast":      "{view: x, root: 0}",
	"send":           "{view: x, to: 1}",
	"recv":           "{view: x, from: 0}",
}

// joinAnd writes a list as "a", "a and b" or "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := items[0]
	for _, s := range items[1 : len(items)-1] {
		out += ", " + s
	}
	return out + " and " + items[len(items)-1]
}

// rankSeed is the seed of rank's stream for a random init with per_rank:
// seed itself for rank 0 (so a world of one is the plain init), and for
// the others seed mixed with a hash of the rank (MurmurHash3's finaliser,
// which maps 0 to 0 and spreads neighbouring ranks far apart).
func rankSeed(seed uint64, rank int) uint64 {
	z := uint64(rank)
	z ^= z >> 33
	z *= 0xff51afd7ed558ccd
	z ^= z >> 33
	z *= 0xc4ceb9fe1a85ec53
	z ^= z >> 33
	return seed ^ z
}

// peerVal reads a root or peer rank, as numVal reads a number: an
// integer, or an expression of rank (this program's rank) and world (the
// number of ranks), and of the parameters, such as "(rank + 1) % world"
// for the next rank of a ring.
func (rd *opReader) peerVal(n *node, what subject) (int, bool) {
	s, isStr := scalarString(rd.resolve(n))
	if !isStr || !mentionsRank(s) {
		return rd.numVal(n, what, false, inRange(n, what, 0, MaxWorld-1))
	}
	ps := rd.params
	known := func(name string) bool { return name == "rank" || name == "world" || ps != nil && ps.known(name) }
	e, err := parseExpr(s, false, known)
	var v int64
	ok := err == nil
	if ok {
		v, ok = leafReader{rd.views, rd.spec}.peerAt(e, n, what, s)
	} else {
		rd.errorf(n, `write an integer expression of rank, world and the parameters, for example "(rank + 1) % world"`, "%s %q: %v", what, clip(s), err)
	}
	if rd.rec != nil {
		rd.keepLeaf(newLeaf(what, n, num{e: e, s: s, rank: true}, nil, numCheck{}), ok)
	}
	rd.vals = append(rd.vals, leafValue{n: v})
	return len(rd.vals) - 1, ok
}

// peerAt is the value of e, a peer's expression s read at n, at the
// load's values of the parameters, rank and world, reported as out of the
// world where it is.
func (lr leafReader) peerAt(e expr, n *node, what subject, s string) (int64, bool) {
	rank, world := lr.spec.Rank, lr.spec.Run.World
	env := map[string]int64{"rank": int64(rank), "world": int64(world)}
	if ps := lr.params; ps != nil {
		for k, v := range ps.values {
			env[k] = v
		}
	}
	v, err := e.eval(env)
	if err != nil {
		lr.errorf(n, "change the expression", "%s %q %v at rank %d of %d", what, clip(s), err, rank, world)
		return 0, false
	}
	if v < 0 || v >= int64(max(world, 1)) {
		lr.errorf(n, fmt.Sprintf("use 0 to %d", max(world, 1)-1), "%s %q is %d at rank %d of %d, out of the world", what, clip(s), v, rank, world)
		return 0, false
	}
	return v, true
}

// mentionsRank reports whether s names rank or world as a whole word.
func mentionsRank(s string) bool {
	return namesAny(s, func(w string) bool { return w == "rank" || w == "world" })
}
