package spec

import (
	"slices"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

// maxInitFile bounds the initial-contents files a spec may name.
const maxInitFile = 1 << 30

func (l *loader) buffers(n *node) {
	f, _ := l.entries(n, about("buffers"))
	l.views.bufs = make(map[string]*bufDecl, len(f.list))
	// The declarations in one allocation, never grown: each stays put.
	l.views.decls = make([]bufDecl, 0, min(len(f.list), MaxBuffers))
	for i, e := range f.list {
		if i == MaxBuffers {
			l.errorf(e.keyN, "split the work into several specs", "the spec has more than %d buffers", MaxBuffers)
			break
		}
		if !l.checkName(e.keyN, "buffer", e.key) {
			continue
		}
		l.views.decls = append(l.views.decls, bufDecl{node: e.keyN, place: int32(len(l.views.bufOrder))})
		d := &l.views.decls[len(l.views.decls)-1]
		l.views.bufs[e.key] = d
		l.views.bufOrder = append(l.views.bufOrder, e.key)
		if e.value == nil {
			if l.rec != nil {
				l.rec.bad = true
			}
			continue
		}
		opts, ok := l.buffer(e.key, e.value, d)
		if ok {
			l.views.declare(l.b, d, e.key, opts.size, opts.list, opts.set)
		}
		if l.rec != nil {
			l.rec.bad = l.rec.bad || !ok || !opts.hasLeaf
			l.rec.bufs = append(l.rec.bufs, bufRecipe{name: e.key, keyN: e.keyN, fields: d.fields, size: opts.leaf, list: opts.list, set: opts.set})
		}
	}
	if l.rec != nil {
		l.rec.bufOrder = l.views.bufOrder
	}
}

// declare makes the buffer of declaration d in b.
func (vs *views) declare(b *dag.Builder, d *bufDecl, name string, size int64, list []dag.BufferOption, set []func(*dag.Buffer)) {
	d.buf = b.Buffer(name, size, list...)
	for _, f := range set {
		f(d.buf)
	}
}

type bufferOpts struct {
	size int64
	list []dag.BufferOption
	// set are what no option says: a device beside a host placement, and
	// contents read from the spec's init (none included).
	set []func(*dag.Buffer)
	// leaf is the size's, or the count's, when the load keeps recipes.
	leaf    leaf
	hasLeaf bool
}

// sizeLeaf keeps, when the load keeps recipes, the leaf of a buffer's
// size or count (units: a size) read at n.
func (rc *recorder) sizeLeaf(lr leafReader, opts *bufferOpts, n *node, what subject, units bool, c numCheck) {
	if rc == nil {
		return
	}
	x, at, ok := lr.numOf(n, units)
	opts.leaf, opts.hasLeaf = newLeaf(what, at, x, nil, c), ok
}

// buffer reads one buffer declaration: a size, or a mapping of properties.
func (l *loader) buffer(name string, n *node, d *bufDecl) (bufferOpts, bool) {
	what := about("buffer " + strconv.Quote(name))
	var opts bufferOpts
	if !isMap(n) {
		// The short form: just a size, of device memory.
		d.fields.set("size", n)
		size, ok := l.number64(n, what.and("size"), true)
		opts.size = size
		c := numCheck{kind: checkSize, n: n, what: what}
		l.rec.sizeLeaf(leafReader{l.views, l.spec}, &opts, n, what.and("size"), true, c)
		if ok {
			_, ok = c.apply(&l.reader, size)
		}
		return opts, ok
	}
	f, ok := l.mapping(n, what, bufferKeys)
	dt := dag.F32
	if v, has := f.get("dtype"); has {
		s, okT := l.oneOf(v, what.and("dtype"), dtypes)
		ok = ok && okT
		dt, _ = dag.ParseDType(s)
		opts.list = append(opts.list, dag.Of(dt))
	}
	sizeKnown := false
	sizeNode, hasSize := f.get("size")
	countNode, hasCount := f.get("count")
	switch {
	case hasSize && hasCount:
		l.errorf(f.keyNode("count"), "give either size or dtype and count", "%s has both size and count", what)
		ok = false
	case hasSize:
		d.fields.set("size", sizeNode)
		size, okS := l.number64(sizeNode, what.and("size"), true)
		c := numCheck{kind: checkSize, n: sizeNode, what: what}
		if ok && okS {
			_, ok = c.apply(&l.reader, size)
		} else {
			ok = false
		}
		opts.size, sizeKnown = size, okS
		l.rec.sizeLeaf(leafReader{l.views, l.spec}, &opts, sizeNode, what.and("size"), true, c)
	case hasCount:
		d.fields.set("size", countNode)
		count, okC := l.number64(countNode, what.and("count"), false)
		c := numCheck{kind: checkCount, n: countNode, what: what, dt: dt}
		if okC {
			count, okC = c.apply(&l.reader, count)
		}
		ok = ok && okC
		if okC {
			opts.size, sizeKnown = count, true
		}
		l.rec.sizeLeaf(leafReader{l.views, l.spec}, &opts, countNode, what.and("count"), false, c)
	}
	if v, has := f.get("placement"); has {
		p, okP := l.oneOf(v, what.and("placement"), placements)
		ok = ok && okP
		switch p {
		case "pinned":
			opts.list = append(opts.list, dag.PinnedHost())
		case "pageable":
			opts.list = append(opts.list, dag.PageableHost())
		}
	}
	if v, has := f.get("device"); has {
		d.fields.set("device", v)
		dev, okD := l.intIn(v, what.and("device"), 0, 1<<16)
		ok = ok && okD && l.placedInWorld(v, what)
		opts.set = append(opts.set, func(b *dag.Buffer) { b.Device = dev })
	}
	temporary := false
	if v, has := f.get("temporary"); has {
		var okT bool
		temporary, okT = l.boolean(v, what.and("temporary"))
		ok = ok && okT
		if temporary {
			opts.list = append(opts.list, dag.Temporary())
		}
	}
	if v, has := f.get("init"); has && temporary && !isNone(v) {
		l.errorf(v, "fill it with an op after it is allocated, or make it persistent", "%s is temporary and has no initial contents", what)
		ok = false
	} else if has {
		d.fields.set("init", v)
		init, fileSize, okI := l.initial(v, what, opts.size, sizeKnown)
		ok = ok && okI
		if okI {
			none := isNone(v)
			opts.set = append(opts.set, func(b *dag.Buffer) { b.Init, b.Uninitialized = init, none })
			if !sizeKnown && fileSize > 0 {
				opts.size, sizeKnown = fileSize, true
			}
		}
	}
	if !sizeKnown && !hasSize && !hasCount && ok {
		l.errorf(f.node, "add size: 4 MiB, or dtype and count", "%s has no size", what)
		ok = false
	}
	return opts, ok
}

// isNone reports whether an init is none: contents deliberately undefined
// before the run (an input the program writes, or one never read first).
func isNone(n *node) bool {
	s, ok := scalarString(n)
	return ok && s == "none"
}

// initial reads a buffer's initial contents: none, zeros, {value: v},
// {random: seed} or {file: path}. For a file it also returns the file's
// size, which sets the buffer's when the spec gives none.
func (l *loader) initial(n *node, what subject, size int64, sizeKnown bool) (dag.Init, int64, bool) {
	const hint = "write none, zeros, {value: 1.5}, {random: 42}, {random: {seed: 42, per_rank: true}} or {file: data.bin}"
	what = what.and("init")
	if s, isStr := scalarString(n); isStr {
		switch {
		case s == "none":
			return dag.Init{}, 0, true
		case slices.Contains(initStrings, s):
			return dag.Init{Kind: dag.InitZeros}, 0, true
		}
		l.errorf(n, hint, "%s %q is not valid", what, s)
		return dag.Init{}, 0, false
	}
	f, ok := l.mapping(n, what, initKeys)
	if !ok {
		return dag.Init{}, 0, false
	}
	if len(f.list) != 1 {
		l.errorf(f.node, hint, "%s must have exactly one of %v", what, initKeys)
		return dag.Init{}, 0, false
	}
	e := f.list[0]
	if e.value == nil {
		return dag.Init{}, 0, false
	}
	switch e.key {
	case "zeros":
		z, ok := l.boolean(e.value, what.and("zeros"))
		if ok && !z {
			return dag.Init{}, 0, true
		}
		return dag.Init{Kind: dag.InitZeros}, 0, ok
	case "value":
		v, ok := l.number(e.value, what.and("value"))
		return dag.Init{Kind: dag.InitValue, Value: v}, 0, ok
	case "random":
		seed, ok := l.randomInit(e.value, what.and("random"))
		return dag.Init{Kind: dag.InitRandom, Seed: seed}, 0, ok
	default: // file
		if l.rec != nil {
			l.rec.bad = true // each load reads the file again
		}
		p, ok := l.str(e.value, what.and("file"))
		if !ok {
			return dag.Init{}, 0, false
		}
		p = ExpandRank(p, l.spec.Rank)
		data, ok := l.paths.readFile(e.value, what.and("file"), p, maxInitFile)
		if !ok {
			return dag.Init{}, 0, false
		}
		if sizeKnown && int64(len(data)) != size {
			l.errorf(e.value, "make the file as large as the buffer, or leave the size out to take the file's",
				"%s file %s holds %d bytes, the buffer %d", what, p, len(data), size)
			return dag.Init{}, 0, false
		}
		if len(data) == 0 {
			l.errorf(e.value, "", "%s file %s is empty", what, p)
			return dag.Init{}, 0, false
		}
		return dag.Init{Kind: dag.InitBytes, Data: data}, int64(len(data)), true
	}
}

// randomInit reads a random init's seed: a number, or {seed, per_rank},
// where per_rank: true gives each rank its own stream (see rankSeed).
func (l *loader) randomInit(n *node, what subject) (uint64, bool) {
	seedN, perRank := n, false
	ok := true
	if isMap(n) {
		f, okF := l.mapping(n, what, randomKeys)
		ok = okF
		var has bool
		if seedN, has = f.get("seed"); !has {
			if !f.has("seed") {
				l.errorf(f.node, "write {seed: 42, per_rank: true}", "%s has no seed", what)
			}
			return 0, false
		}
		if v, has := f.get("per_rank"); has {
			var okP bool
			perRank, okP = l.boolean(v, what.and("per_rank"))
			ok = ok && okP
		}
	}
	seed, okS := l.integer(seedN, what.and("seed"))
	if okS && seed < 0 {
		l.errorf(seedN, "use a seed of 0 or more", "%s seed %d is negative", what, seed)
		okS = false
	}
	if perRank {
		return rankSeed(uint64(seed), l.spec.Rank), ok && okS
	}
	return uint64(seed), ok && okS
}
