package spec

// The ops that move and set memory: copy, fill, alloc and free.

import (
	"github.com/dagrun/dagrun/dag"
)

func (rd *opReader) copyOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	f, ok := rd.mapping(n, what.and("copy"), copyKeys)
	if f.node == nil {
		return nil
	}
	from, hasFrom := f.get("from")
	to, hasTo := f.get("to")
	if !hasFrom || !hasTo {
		rd.errorf(f.node, "write copy: {from: src, to: dst}", "%s copy needs from and to", what)
		return nil
	}
	d.fields.set("from", from)
	d.fields.set("to", to)
	src, _, okS := rd.views.view(from, what.and("copy from"), false)
	dst, _, okD := rd.views.view(to, what.and("copy to"), false)
	if !ok || !okS || !okD {
		return nil
	}
	return b.Copy(dst, src)
}

func (rd *opReader) fillOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	f, ok := rd.mapping(n, what.and("fill"), fillKeys)
	if f.node == nil {
		return nil
	}
	bufN, hasBuf := f.get("buffer")
	valN, hasVal := f.get("value")
	if !hasBuf || !hasVal {
		rd.errorf(f.node, "write fill: {buffer: x, value: 0}", "%s fill needs buffer and value", what)
		return nil
	}
	d.fields.set("buffer", bufN)
	d.fields.set("value", valN)
	v, _, okV := rd.views.view(bufN, what.and("fill buffer"), false)
	x, okX := rd.number(valN, what.and("fill value"))
	if !ok || !okV || !okX {
		return nil
	}
	return b.Fill(v, x)
}

func (rd *opReader) lifetimeOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	r := rd.views.bufferRef(n, what.and(d.kind))
	if r == nil || r.buf == nil {
		return nil
	}
	if d.kind == "alloc" {
		return b.Alloc(r.buf)
	}
	return b.Free(r.buf)
}

// memset2DOp reads memset2d: {buffer, rows, width, pitch, value}: rows rows
// of width elements, each pitch (bytes, with units or not) after the one
// before, from the start of buffer (a view).
func (rd *opReader) memset2DOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	what = what.and("memset2d")
	f, ok := rd.mapping(n, what, memset2DKeys)
	if f.node == nil {
		return nil
	}
	var missing []string
	for _, k := range memset2DKeys {
		if !f.has(k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		rd.errorf(f.node, "write memset2d: {buffer: x, rows: 4, width: 16, pitch: 256, value: 0}", "%s needs %s", what, joinAnd(missing))
		return nil
	}
	// dag reports the region's problems with no field: they land on the
	// mapping, the pitch's on pitch.
	d.fields.set("", f.node)
	for _, e := range f.list {
		if e.value != nil {
			d.fields.set(e.key, e.value)
		}
	}
	bufN, _ := f.get("buffer")
	rowsN, _ := f.get("rows")
	widthN, _ := f.get("width")
	pitchN, _ := f.get("pitch")
	valN, _ := f.get("value")
	v, _, okV := rd.views.view(bufN, what.and("buffer"), false)
	rows, okR := rd.intIn(rowsN, what.and("rows"), 1, MaxBuffers*1024)
	width, okW := rd.intIn(widthN, what.and("width"), 1, 1<<40)
	pitch, okP := rd.size(pitchN, what.and("pitch"))
	x, okX := rd.number(valN, what.and("value"))
	if !ok || !okV || !okR || !okW || !okP || !okX {
		return nil
	}
	return b.Memset2D(v, dag.Memset2DSpec{Rows: rows, Width: width, Pitch: pitch}, x)
}
