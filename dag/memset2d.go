package dag

import (
	"fmt"
	"math"
)

// Memset2DSpec is the region a Memset2D op sets: Rows rows of Width
// elements (of the buffer's DType), each row Pitch bytes after the one
// before, the first at the start of the op's view (cuMemsetD2D32's
// shape, with the width in elements).
//
// Dependencies: dag's accesses are one byte range each, so the op's one
// access is the region's bounding range, from the first row's first byte
// to the last row's last. The bytes between rows that the op leaves alone
// count as written: an op that touches only them is still ordered with
// the memset, which costs concurrency and never correctness.
type Memset2DSpec struct {
	Rows, Width int
	Pitch       int64
}

// Bound is the size of the region's bounding range in bytes, for elements
// of es bytes; false when a dimension is below 1 or it does not fit an
// int64.
func (m Memset2DSpec) Bound(es int64) (int64, bool) {
	if m.Rows < 1 || m.Width < 1 || es < 1 {
		return 0, false
	}
	row, ok := mulInt64(int64(m.Width), es)
	if !ok {
		return 0, false
	}
	skip, ok := mulInt64(int64(m.Rows-1), m.Pitch)
	if !ok || skip > math.MaxInt64-row {
		return 0, false
	}
	return skip + row, true
}

// Memset2D sets a strided 2-D region of dst's buffer to v, read as the
// buffer's DType: m.Rows rows of m.Width elements, row i starting
// i*m.Pitch bytes after dst's offset. The op's access is the region's
// bounding range (see Memset2DSpec), which must lie within dst. Elements
// are 1, 2 or 4 bytes, as the driver's 2-D memsets write them.
func (g *Builder) Memset2D(dst View, m Memset2DSpec, v float64, opts ...OpOption) *Op {
	acc := dst
	if dst.Buf != nil {
		if n, ok := m.Bound(dst.Buf.DType.Size()); ok && n <= dst.Size {
			acc.Size = n
		}
	}
	o := g.op(Memset2D, Out(acc))
	o.Memset2D = &m
	o.FillValue = v
	return o.With(opts...)
}

// checkMemset2D: a region with whole, aligned elements of at most 4 bytes
// within the view, and a value the element type holds.
func checkMemset2D(c *checker, o *Op) {
	m := o.Memset2D
	if m == nil {
		c.fail(o, "", "declare 2-D memsets with Builder.Memset2D", "memset2d has no region")
		return
	}
	v := o.Access[0]
	dt := v.Buf.DType
	es := dt.Size()
	switch {
	case es > 4:
		c.fail(o, "", "use a buffer of 1-, 2- or 4-byte elements, or a fill per row",
			"memset2d of %s elements: the driver's 2-D memsets write at most 4 bytes an element", dt)
	case m.Rows < 1 || m.Width < 1:
		c.fail(o, "", "give at least one row of one element", "region of %d rows of %d elements", m.Rows, m.Width)
	case m.Pitch < int64(m.Width)*es:
		c.fail(o, "pitch", fmt.Sprintf("make the pitch at least a row, %d bytes", int64(m.Width)*es),
			"pitch of %d bytes is less than a row of %d %s elements", m.Pitch, m.Width, dt)
	case v.Offset%es != 0 || m.Pitch%es != 0:
		c.fail(o, "", "start the region and its rows on whole elements",
			"offset %d or pitch %d is not a multiple of %s's %d bytes", v.Offset, m.Pitch, dt, es)
	default:
		if n, ok := m.Bound(es); !ok || n != v.Size {
			c.fail(o, "", "make the view hold the whole region",
				"region of %d rows of %d elements at a pitch of %d bytes does not fit %s", m.Rows, m.Width, m.Pitch, v.View)
		}
	}
	if msg := valueProblem(dt, o.FillValue); msg != "" {
		c.fail(o, "value", fmt.Sprintf("set %s to a value %s holds", v.Buf.Name, dt), "memset2d value %s", msg)
	}
}

// memset2DBytes is the bytes the region holds, gaps between rows left out.
func memset2DBytes(o *Op) int64 {
	if o.Memset2D == nil || len(o.Access) == 0 || o.Access[0].Buf == nil {
		return 0
	}
	n, ok := mulInt64(int64(o.Memset2D.Rows), int64(o.Memset2D.Width), o.Access[0].Buf.DType.Size())
	if !ok {
		return math.MaxInt64
	}
	return n
}

// Memset2DRows calls f with the byte range of each row of o's region,
// relative to o's access, for backends that set the rows one by one.
func (o *Op) Memset2DRows(f func(start, end int64)) {
	m := o.Memset2D
	row := int64(m.Width) * o.Access[0].Buf.DType.Size()
	for i := range int64(m.Rows) {
		f(i*m.Pitch, i*m.Pitch+row)
	}
}
