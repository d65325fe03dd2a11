package dag

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// MaxCost is the largest estimated duration an op may carry: costs are
// summed along paths, and a day per op is far beyond any real GPU op.
const MaxCost = 24 * time.Hour

// checker collects the problems of a Builder's declarations.
type checker struct {
	b    *Builder
	errs ErrorList
}

func (c *checker) add(e *Error) { c.errs = append(c.errs, e) }

func (c *checker) buffers() {
	// A graph has a few buffers, whose names a scan checks quicker than
	// a map; past 32 a map keeps a graph of many linear.
	var names map[string]struct{}
	if len(c.b.bufs) > 32 {
		names = make(map[string]struct{}, len(c.b.bufs))
	}
	for i, b := range c.b.bufs {
		c.buffer(b, c.b.bufs[:i], names)
	}
}

// buffer checks b, declared after before, whose names are in names when
// it is not nil.
func (c *checker) buffer(b *Buffer, before []*Buffer, names map[string]struct{}) {
	bad := func(field, hint, format string, a ...any) {
		name := b.Name
		if name == "" {
			name = fmt.Sprintf("#%d", b.ID)
		}
		c.add(&Error{Buffer: name, Field: field, Msg: fmt.Sprintf(format, a...), Hint: hint, decl: b.decl})
	}
	var dup bool
	if names != nil {
		_, dup = names[b.Name]
		names[b.Name] = struct{}{}
	} else {
		dup = slices.ContainsFunc(before, func(p *Buffer) bool { return p.Name == b.Name })
	}
	if b.Name == "" {
		bad("", "", "buffer has no name")
	} else if dup {
		bad("", "give each buffer its own name", "name is used by two buffers")
	}
	switch _, fits := mulInt64(b.count, b.of.Size()); {
	case !b.array:
		if b.Size <= 0 {
			bad("size", "", "size %d is not positive", b.Size)
		}
	case b.count <= 0:
		bad("count", "", "count %d is not positive", b.count)
	case !fits:
		bad("count", "", "%d elements of %s do not fit in an int64 of bytes", b.count, b.of)
	case b.DType != b.of:
		bad("dtype", fmt.Sprintf("declare it with Array(%q, %s, n), or leave Of out", b.Name, b.DType),
			"declared as an array of %d %s elements, and Of makes it %s", b.count, b.of, b.DType)
	}
	if !b.DType.Valid() {
		bad("dtype", "use u8, i32, i64, f16, bf16, f32 or f64", "unknown dtype %s", b.DType)
		b.DType = U8 // keep the size checks below meaningful
	}
	if b.Device < 0 {
		bad("device", "", "device %d is negative", b.Device)
	}
	if b.initErr != "" {
		bad("init", "", "initial data: %s", b.initErr)
	} else if b.dataOf != nil && b.Init.Kind == InitBytes && *b.dataOf != b.DType {
		bad("init", "give Of before Data, or declare it with Array", "initial data was encoded as %s, and the buffer is %s", *b.dataOf, b.DType)
	}
	if b.Init.Kind == InitBytes && int64(len(b.Init.Data)) != b.Size {
		bad("init", "make the file as large as the buffer, or the buffer as large as the file",
			"initial contents hold %d bytes, the buffer %d", len(b.Init.Data), b.Size)
	}
	if b.Temporary && b.Init.Kind != InitNone {
		bad("init", "fill it with an op after it is allocated, or make it persistent", "a temporary buffer has no initial contents")
	}
	if (b.Init.Kind == InitValue || b.Init.Kind == InitRandom) && b.Size%b.DType.Size() != 0 {
		bad("size", "", "size %d is not a whole number of %s elements", b.Size, b.DType)
	}
	if b.Init.Kind == InitValue {
		if msg := valueProblem(b.DType, b.Init.Value); msg != "" {
			bad("init", fmt.Sprintf("use a value %s holds", b.DType), "initial value %s", msg)
		}
	}
}

// valueProblem says why v is not a value of dt, or "" when it is. Integer
// types take finite values in their range (fractions are truncated, as C
// converts them); f32 takes what does not round to an infinity.
func valueProblem(dt DType, v float64) string {
	lo, hi := 0.0, 0.0
	switch dt {
	case U8:
		lo, hi = 0, math.MaxUint8
	case I32:
		lo, hi = math.MinInt32, math.MaxInt32
	case I64:
		// float64(MaxInt64) rounds up to 2^63, which does not fit.
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprintf("%v is not a number an integer type holds", v)
		}
		if v < -(1<<63) || v >= 1<<63 {
			return fmt.Sprintf("%g is out of the range of i64", v)
		}
		return ""
	case F32:
		if !math.IsInf(v, 0) && !math.IsNaN(v) && math.IsInf(float64(float32(v)), 0) {
			return fmt.Sprintf("%g is beyond the largest f32 (%g)", v, math.MaxFloat32)
		}
		return ""
	case F16:
		if !math.IsInf(v, 0) && !math.IsNaN(v) && math.IsInf(float64(F16ToFloat32(F16FromFloat64(v))), 0) {
			return fmt.Sprintf("%g is beyond the largest f16 (65504)", v)
		}
		return ""
	case BF16:
		if !math.IsInf(v, 0) && !math.IsNaN(v) && math.IsInf(float64(BF16ToFloat32(BF16FromFloat64(v))), 0) {
			return fmt.Sprintf("%g is beyond the largest bf16", v)
		}
		return ""
	default:
		return ""
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprintf("%v is not a number an integer type holds", v)
	}
	if v <= lo-1 || v >= hi+1 {
		return fmt.Sprintf("%g is out of the range of %s [%g, %g]", v, dt, lo, hi)
	}
	return ""
}

func (c *checker) ops() {
	n := len(c.b.ops)
	names := make(map[string]struct{}, n)
	for _, o := range c.b.ops {
		if _, dup := names[o.Name]; dup {
			c.add(&Error{Op: o.Name, Msg: "name is used by two operations", Hint: "give each operation its own name", decl: o.decl})
		}
		names[o.Name] = struct{}{}
	}
	for _, o := range c.b.ops {
		o.badAccess, o.badAfter = false, false
		c.op(o)
	}
	// Names are unique across bodies too: errors and traces name ops.
	for _, o := range c.b.ops {
		for _, b := range o.Bodies() {
			b.Walk(func(in *Op) {
				if _, dup := names[in.Name]; dup {
					c.add(&Error{Op: in.Name, Msg: "name is used by two operations", Hint: "give each operation its own name", decl: o.decl})
				}
				names[in.Name] = struct{}{}
			})
		}
	}
}

// fail reports a problem of op o.
func (c *checker) fail(o *Op, field, hint, format string, a ...any) {
	c.add(&Error{Op: o.Name, Field: field, Msg: fmt.Sprintf(format, a...), Hint: hint, decl: o.decl})
}

func (c *checker) op(o *Op) {
	if !o.Kind.Valid() {
		c.fail(o, "", "", "unknown kind %d", o.Kind)
		o.badAccess = true
		return
	}
	if n := o.Kind.Info().Accesses; n >= 0 && len(o.Access) != n {
		c.fail(o, "", "", "%s takes %d accesses, not %d", o.Kind, n, len(o.Access))
		o.badAccess = true
		return
	}
	if !c.accesses(o) {
		o.badAccess = true
		return
	}
	if o.Device == -1 {
		o.Device = 0
		for _, a := range o.Access {
			if a.Buf.Placement == Device {
				o.Device = a.Buf.Device
				break
			}
		}
	}
	if o.Device < 0 {
		c.fail(o, "device", "", "device %d is negative", o.Device)
	}
	if o.Priority < MinPriority || o.Priority > MaxPriority {
		c.fail(o, "priority", fmt.Sprintf("use high, normal, low or an integer from %d to %d (higher runs first)", MinPriority, MaxPriority), "priority %d is out of range", o.Priority)
	}
	if o.Cost < 0 || o.Cost > MaxCost {
		c.fail(o, "cost", fmt.Sprintf("estimate a cost between 0 and %v", MaxCost), "cost %v is out of range", o.Cost)
	}
	more := o.extras()
	for _, p := range more.after {
		switch {
		case p == nil || p.ID < 0 || p.ID >= len(c.b.ops) || c.b.ops[p.ID] != p:
			c.fail(o, "after", "", "after names an operation this graph does not declare")
			o.badAfter = true
		case p == o:
			c.fail(o, "after", "remove it from its own after list", "operation is after itself")
			o.badAfter = true
		}
	}
	for _, e := range more.optErrs {
		e.Op, e.decl = o.Name, o.decl
		c.add(e)
	}
	kindTable[o.Kind].check(c, o)
}

// accesses checks that every access is a view of a buffer of this graph
// within its bounds; false when inference cannot use them.
func (c *checker) accesses(o *Op) bool {
	for i, a := range o.Access {
		if b := a.Buf; b == nil || b.ID < 0 || b.ID >= len(c.b.bufs) || c.b.bufs[b.ID] != b {
			c.fail(o, "", "declare buffers with the same Builder", "access %d uses a buffer this graph does not declare", i)
			return false
		}
		// Offset+Size is never computed before it is known to fit.
		if a.Offset < 0 || a.Size <= 0 || a.Offset > a.Buf.Size || a.Size > a.Buf.Size-a.Offset {
			c.fail(o, "", fmt.Sprintf("%s holds bytes [0:%d)", a.Buf.Name, a.Buf.Size),
				"view of %d bytes at offset %d of %s is out of range", a.Size, a.Offset, a.Buf.Name)
			return false
		}
		if a.Mode&^ReadWrite != 0 || a.Mode == 0 {
			c.fail(o, "", "use in, out or inout", "access %d of %s has mode %d", i, a.Buf.Name, a.Mode)
		}
	}
	return true
}

func placeName(b *Buffer) string {
	if b.Placement == Device {
		return fmt.Sprintf("device %d", b.Device)
	}
	return b.Placement.String() + " host"
}

func modeVerb(m Mode) string {
	switch m {
	case Read:
		return "reads"
	case Write:
		return "writes"
	}
	return "reads and writes"
}
