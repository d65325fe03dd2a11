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
	_, okS := rd.viewVal(from, what.and("copy from"), false)
	_, okD := rd.viewVal(to, what.and("copy to"), false)
	if !ok || !okS || !okD {
		return nil
	}
	return made(rd, b, copyMaker{})
}

// copyMaker makes a copy: its leaves are from and to.
type copyMaker struct{}

func (copyMaker) make(_ *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	return b.Copy(v[1].view, v[0].view)
}

// fillMaker makes a fill of value: its leaf is the view.
type fillMaker struct{ value float64 }

func (m fillMaker) make(_ *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	return b.Fill(v[0].view, m.value)
}

// lifetimeMaker makes an alloc or free of a buffer: of none where its
// declaration is wrong at the load's values.
type lifetimeMaker struct {
	place int32 // the buffer's declaration's (views.decls)
	alloc bool
}

func (m lifetimeMaker) make(rd *opReader, b *dag.Builder, _ []leafValue) *dag.Op {
	d := &rd.views.decls[m.place]
	if d.buf == nil {
		return nil
	}
	if m.alloc {
		return b.Alloc(d.buf)
	}
	return b.Free(d.buf)
}

// memset2DMaker makes a memset2d of value: its leaves are the view, rows,
// width and pitch.
type memset2DMaker struct{ value float64 }

func (m memset2DMaker) make(_ *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	return b.Memset2D(v[0].view, dag.Memset2DSpec{Rows: int(v[1].n), Width: int(v[2].n), Pitch: v[3].n}, m.value)
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
	_, okV := rd.viewVal(bufN, what.and("fill buffer"), false)
	x, okX := rd.number(valN, what.and("fill value"))
	if !ok || !okV || !okX {
		return nil
	}
	return made(rd, b, fillMaker{x})
}

func (rd *opReader) lifetimeOp(b *dag.Builder, d *opDecl, _ fields, n *node, what subject) *dag.Op {
	r := rd.views.bufferRef(n, what.and(d.kind))
	if r == nil {
		return nil
	}
	return made(rd, b, lifetimeMaker{place: r.place, alloc: d.kind == "alloc"})
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
	_, okV := rd.viewVal(bufN, what.and("buffer"), false)
	_, okR := rd.numVal(rowsN, what.and("rows"), false, inRange(rowsN, what.and("rows"), 1, MaxBuffers*1024))
	_, okW := rd.numVal(widthN, what.and("width"), false, inRange(widthN, what.and("width"), 1, 1<<40))
	_, okP := rd.numVal(pitchN, what.and("pitch"), true, numCheck{})
	x, okX := rd.number(valN, what.and("value"))
	if !ok || !okV || !okR || !okW || !okP || !okX {
		return nil
	}
	return made(rd, b, memset2DMaker{x})
}
