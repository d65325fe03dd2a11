package spec

// The ops that move and set memory: copy, fill, alloc and free.

import (
	"github.com/dagrun/dagrun/dag"
)

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
