package spec

// Loops and branches: while and if ops, whose bodies are lists of ops
// read as the ops list is, into the nested builders of dag.Builder.While
// and dag.Builder.If.

import (
	"fmt"
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
	cond, _, ok := rd.views.view(n, what.and("while"), false)
	var most int64
	if v, has := f.get("max"); has {
		d.fields.set("max", v)
		m, okM := rd.integer(v, what.and("max"))
		if okM && (m < 1 || m > dag.MaxIterations) {
			rd.errorf(v, fmt.Sprintf("bound the loop between 1 and %d iterations, or leave max out", int64(dag.MaxIterations)), "%s max %d is out of range", what, m)
			okM = false
		}
		ok = ok && okM
		most = m
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
	return b.While(cond, fill, dag.AtMost(most))
}

func (rd *opReader) ifOp(b *dag.Builder, d *opDecl, f fields, n *node, what subject) *dag.Op {
	d.fields.set("if", n)
	cond, _, ok := rd.views.view(n, what.and("if"), false)
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
	return b.If(cond, then, otherwise)
}

// body reads the ops list n, a body of the control op d called key (body,
// then or else), and returns what declares them in the body's builder:
// the ops are read when dag calls it, with that builder as the loader's.
// ok is false when the list itself is wrong; its ops' own errors come
// when they are read.
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
	return func(b *dag.Builder) {
		saved := l.b
		l.b = b
		l.nesting++
		defer func() { l.b = saved; l.nesting-- }()
		for i, it := range items {
			if len(l.decls.ops) >= MaxOps {
				l.errorf(it, "split the work into several specs", "the spec has more than %d ops, counting those of bodies", MaxOps)
				return
			}
			od := &opDecl{opInfo: new(opInfo)}
			if l.decls.bodies == nil {
				l.decls.bodies = map[*opDecl]bodyOp{}
			}
			l.decls.bodies[od] = bodyOp{path: parent + "." + key + "[" + strconv.Itoa(i) + "]", parent: d, body: id}
			l.opDecl(len(l.decls.ops), it, od)
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
