package spec

// Loops and branches: while and if ops, whose bodies are lists of ops
// read as the ops list is, into the nested builders of dag.Builder.While
// and dag.Builder.If.

import (
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

var (
	whileKeys = []string{"max", "body"}
	ifKeys    = []string{"then", "else"}
)

// The control ops' readers read ops themselves, so they join the table
// when the package starts: in its literal they would make an
// initialisation cycle.
func init() {
	for k, read := range map[dag.OpKind]readFunc{dag.While: (*opReader).whileOp, dag.If: (*opReader).ifOp} {
		e := kindKeys[k]
		e.read = read
		kindKeys[k] = e
	}
}

// bodyOp is where an op of a body is declared: the label messages give it
// when the spec does not name it (ops[2].body[0]), the control op whose
// body holds it, and which body (each list its own number), for the after
// lists, which may name only ops of the same body.
type bodyOp struct {
	path   string
	parent *opDecl
	body   int32
}

func (rd *opReader) whileOp(b *dag.Builder, d *opDecl, f fields, n *node, what subject) *dag.Op {
	d.fields.set("while", n)
	_, ok := rd.viewVal(n, what.and("while"), false)
	m := controlMaker{most: -1}
	if v, has := f.get("max"); has {
		d.fields.set("max", v)
		var okM bool
		m.most, okM = rd.numVal(v, what.and("max"), false, numCheck{kind: checkIterations, n: v, what: what})
		ok = ok && okM
	}
	bodyN, has := f.get("body")
	if !has {
		rd.errorf(f.node, "write body: [...], the ops the loop repeats", "%s while needs a body", what)
		return nil
	}
	// The bodies' ops take field places of their own from the slab: this
	// op's must not be where they write.
	d.fields = append(fieldLocs(nil), d.fields...)
	fill, okB := rd.body(d, bodyN, what.and("body"), "body")
	if !ok || !okB {
		rd.decls.discard(fill)
		return nil
	}
	rd.fills = append(rd.fills[:0], fill)
	return made(rd, b, m)
}

func (rd *opReader) ifOp(b *dag.Builder, d *opDecl, f fields, n *node, what subject) *dag.Op {
	d.fields.set("if", n)
	_, ok := rd.viewVal(n, what.and("if"), false)
	thenN, has := f.get("then")
	if !has {
		rd.errorf(f.node, "write then: [...], the ops run when the flag is set, and else: [...] if some run when it is not", "%s if needs then", what)
		return nil
	}
	d.fields = append(fieldLocs(nil), d.fields...)
	then, okT := rd.body(d, thenN, what.and("then"), "then")
	var otherwise func(*dag.Builder)
	okE := true
	if elseN, has := f.get("else"); has {
		otherwise, okE = rd.body(d, elseN, what.and("else"), "else")
	}
	if !ok || !okT || !okE {
		rd.decls.discard(then)
		rd.decls.discard(otherwise)
		return nil
	}
	rd.fills = append(rd.fills[:0], then)
	if otherwise != nil {
		rd.fills = append(rd.fills, otherwise)
	}
	return made(rd, b, controlMaker{branch: true, most: -1})
}

// controlMaker makes a loop (its leaves: the flag, and max when given at
// the place most, -1 when not) or a branch (its leaf: the flag), whose
// bodies opReader.fills declares: body, or then and else.
type controlMaker struct {
	branch bool
	most   int
}

func (m controlMaker) make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	// The bodies' ops, read or made within b.While or b.If, take over
	// rd.fills and v's room: what this op needs of them is taken first.
	fills, cond := rd.fills, v[0].view
	if m.branch {
		var otherwise func(*dag.Builder)
		if len(fills) > 1 {
			otherwise = fills[1]
		}
		return b.If(cond, fills[0], otherwise)
	}
	var most int64
	if m.most >= 0 {
		most = v[m.most].n
	}
	return b.While(cond, fills[0], dag.AtMost(most))
}

// bodyRecipe is a body of a loop or branch as a load that keeps recipes
// read it: its number (loader.nBodies), its ops' recipes and where each
// is declared (bodyOp.path).
type bodyRecipe struct {
	id    int32
	ops   []opRecipe
	paths []string
}

// controlAgain makes the loop or branch of r, declared as d, at the
// load's values (ok: its leaves are right), with its bodies made of their
// recipes: as whileOp and ifOp read them, which read the bodies of a
// wrong one apart (decls.discard).
func (rd *opReader) controlAgain(b *dag.Builder, r *opRecipe, d *opDecl, ok bool) *dag.Op {
	var fills [2]func(*dag.Builder)
	for i, body := range r.bodies {
		fills[i] = rd.bodyAgain(d, body)
	}
	if !ok {
		rd.decls.discard(fills[0])
		rd.decls.discard(fills[1])
		return nil
	}
	rd.fills = append(rd.fills[:0], fills[:len(r.bodies)]...)
	return r.maker.make(rd, b, rd.vals)
}

// bodyAgain is what declares the ops of body, a body of d, in a builder
// at the load's values, as body's function reads them.
func (rd *opReader) bodyAgain(d *opDecl, body *bodyRecipe) func(*dag.Builder) {
	return func(b *dag.Builder) {
		decls := make([]opDecl, len(body.ops))
		if rd.decls.bodies == nil {
			rd.decls.bodies = make(map[*opDecl]bodyOp, len(body.ops))
		}
		for i := range body.ops {
			r, od := &body.ops[i], &decls[i]
			od.opInfo = &r.info
			rd.decls.bodies[od] = bodyOp{path: body.paths[i], parent: d, body: body.id}
			rd.decls.ops = append(rd.decls.ops, od)
			rd.declare(b, r, od)
		}
	}
}

// body reads the ops list n, a body of the control op d called key (body,
// then or else), and returns what declares them in the body's builder:
// the ops are read when dag calls it, with that builder as the loader's.
// ok is false when the list itself is wrong; its ops' own errors come
// when they are read. A load that keeps recipes keeps the body's among
// the control op's.
func (l *loader) body(d *opDecl, n *node, what subject, key string) (fill func(*dag.Builder), ok bool) {
	items, ok := l.sequence(n, what)
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		l.errorf(n, "give it the ops it runs, or remove the "+d.kind, "%s is empty", what)
		return nil, false
	}
	if l.nesting >= MaxNesting {
		l.errorf(n, "run the inner loops and branches as ops of their own, after the outer ones", "loops and branches nest more than %d deep here", MaxNesting)
		return nil, false
	}
	d.fields.set(key, n)
	parent := l.decls.unnamedLabel(d)
	l.nBodies++
	id := l.nBodies
	var rec *bodyRecipe
	if l.rec != nil {
		rec = &bodyRecipe{id: id}
		l.kinds.bodies = append(l.kinds.bodies, rec)
	}
	return func(b *dag.Builder) {
		saved := l.b
		l.b = b
		l.nesting++
		// The body's ops are read as the control op's are: what the
		// reader keeps of the control op waits for them.
		outer := l.kinds.opRecording
		l.kinds.opRecording = opRecording{}
		defer func() { l.b = saved; l.nesting--; l.kinds.opRecording = outer }()
		for i, it := range items {
			if len(l.decls.ops) >= MaxOps {
				l.errorf(it, "split the work into several specs", "the spec has more than %d ops, counting those of bodies", MaxOps)
				return
			}
			od := &opDecl{opInfo: new(opInfo)}
			if l.decls.bodies == nil {
				l.decls.bodies = map[*opDecl]bodyOp{}
			}
			path := parent + "." + key + "[" + strconv.Itoa(i) + "]"
			l.decls.bodies[od] = bodyOp{path: path, parent: d, body: id}
			l.opDecl(len(l.decls.ops), it, od)
			if rec != nil {
				if r, okR := l.recipeOf(od); okR {
					rec.ops = append(rec.ops, r)
					rec.paths = append(rec.paths, path)
				}
			}
		}
	}, true
}

// discard reads a body whose control op is wrong into a builder of its
// own, so that its ops' errors come in the same round; its ops are kept
// out of the graph.
func (ds *decls) discard(fill func(*dag.Builder)) {
	if fill == nil {
		return
	}
	start := len(ds.ops)
	fill(dag.New())
	for _, d := range ds.ops[start:] {
		d.op = nil
	}
}

// unnamedLabel is how messages name op d when the spec does not: ops[i],
// or its place in a body, ops[i].body[j].
func (ds *decls) unnamedLabel(d *opDecl) string {
	if b, ok := ds.bodies[d]; ok {
		return b.path
	}
	return opIndex(int(d.index))
}

// bodyOf is the number of the body that declares d; 0 for the ops list.
func (ds *decls) bodyOf(d *opDecl) int32 { return ds.bodies[d].body }
