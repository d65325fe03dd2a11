package dag

import (
	"fmt"
	"slices"
)

// A Builder collects the buffers, kernels and operations of a graph in
// declaration order; Build checks them and infers the dependencies.
// Problems are reported by Build, all at once, so declaring reads straight.
type Builder struct {
	bufs    []*Buffer
	kernels []*Kernel
	ops     []*Op
	decls   int32 // buffers and ops declared so far, for ErrorList's order

	// A body's builder (see While) shares the buffers and kernels of the
	// builder it is nested in while it builds, and names its unnamed ops
	// with prefix.
	nestedIn *Builder
	prefix   string

	// Slabs the ops, launches and their small slices are carved from, a
	// chunk at a time: a spec of a million ops makes a few thousand
	// allocations for them instead of millions. A body's builder carves
	// from the slabs of the builder it is nested in (see slabs), so a
	// body of one op costs one op, not a chunk.
	opSlab     slab[Op]
	launchSlab slab[LaunchSpec]
	gemmSlab   slab[GemmSpec]
	bufSlab    slab[Buffer]
	accSlab    slab[Access]
	argSlab    slab[Arg]
}

// slabLen is how many ops (launches, accesses, arguments) one chunk holds
// at most.
const slabLen = 256

// slab hands out items a chunk at a time. Chunks start small and double
// up to slabLen: a graph of a few ops (one shape of a spec, made again
// for each shape) then allocates and clears a few, not 256 of each.
type slab[T any] struct {
	free  []T
	chunk int // the length of the last chunk
}

// take returns n items, zero, their capacity n.
func (s *slab[T]) take(n int) []T {
	if n > len(s.free) {
		s.chunk = min(slabLen, max(8, 2*s.chunk, n))
		s.free = make([]T, s.chunk)
	}
	t := s.free[:n:n]
	s.free = s.free[n:]
	return t
}

// reserve makes room for n more items in one chunk, up to slabLen.
func (s *slab[T]) reserve(n int) {
	if n = min(n, slabLen); n > len(s.free) {
		s.chunk, s.free = n, make([]T, n)
	}
}

// Grow makes room for buffers more buffers and ops more ops, with
// accesses accesses among them, in one allocation each: for a program
// that knows how many it will declare, such as a spec loaded again at
// other values of its parameters.
func (g *Builder) Grow(buffers, ops, accesses int) {
	g.bufs = slices.Grow(g.bufs, buffers)
	g.ops = slices.Grow(g.ops, ops)
	s := g.slabs()
	s.bufSlab.reserve(buffers)
	s.opSlab.reserve(ops)
	s.accSlab.reserve(accesses)
}

// slabs is the builder whose slabs g carves from: the outermost one it
// is nested in while it builds.
func (g *Builder) slabs() *Builder {
	for g.nestedIn != nil {
		g = g.nestedIn
	}
	return g
}

func (g *Builder) newOp() *Op { return &g.slabs().opSlab.take(1)[0] }

func (g *Builder) newLaunch() *LaunchSpec { return &g.slabs().launchSlab.take(1)[0] }

func (g *Builder) newGemm() *GemmSpec { return &g.slabs().gemmSlab.take(1)[0] }

// accesses is an empty slice with room for n accesses (nil for none); appending beyond
// n copies it, so it never reaches into the next op's.
func (g *Builder) accesses(n int) []Access {
	if n == 0 {
		return nil
	}
	if n > slabLen/4 {
		return make([]Access, 0, n)
	}
	return g.slabs().accSlab.take(n)[:0]
}

// args is accesses for a launch's arguments.
func (g *Builder) args(n int) []Arg {
	if n == 0 {
		return nil
	}
	if n > slabLen/4 {
		return make([]Arg, 0, n)
	}
	return g.slabs().argSlab.take(n)[:0]
}

// New returns an empty Builder.
func New() *Builder { return &Builder{} }

// Buffer declares a buffer of size bytes, on device 0 unless an option says
// otherwise.
func (g *Builder) Buffer(name string, size int64, opts ...BufferOption) *Buffer {
	g.decls++
	b := &g.slabs().bufSlab.take(1)[0]
	*b = Buffer{ID: len(g.bufs), Name: name, Size: size, DType: F32, decl: g.decls}
	for _, o := range opts {
		if o != nil {
			o.applyBuffer(b)
		}
	}
	g.bufs = append(grow(g.bufs), b)
	return b
}

// Array declares a buffer of count elements of type dt (Array("x", F32,
// 256) holds 1024 bytes), on device 0 unless an option says otherwise.
// Buffer declares one by its size in bytes; an Of option that changes an
// Array's element type is a Build error, since it would change what count
// means.
func (g *Builder) Array(name string, dt DType, count int64, opts ...BufferOption) *Buffer {
	b := g.Buffer(name, 0, append([]BufferOption{Of(dt)}, opts...)...)
	b.array, b.count, b.of = true, count, dt
	if n, ok := mulInt64(count, dt.Size()); ok && count > 0 && dt.Valid() {
		b.Size = n
	}
	return b
}

// Kernel declares a kernel that is not in the builtin library.
func (g *Builder) Kernel(k *Kernel) *Kernel {
	g.kernels = append(g.kernels, k)
	return k
}

// op declares an op of kind whose accesses are acc itself (a caller's
// slice stays the op's, as it always has).
func (g *Builder) op(kind OpKind, acc ...Access) *Op {
	g.decls++
	o := g.newOp()
	*o = Op{ID: len(g.ops), Kind: kind, Access: acc, Device: -1, decl: g.decls}
	g.ops = append(grow(g.ops), o)
	return o
}

// opOf is op for the builder's own accesses, copied into its slab.
func (g *Builder) opOf(kind OpKind, acc ...Access) *Op {
	return g.op(kind, append(g.accesses(len(acc)), acc...)...)
}

// Alloc allocates temporary buffer b, stream-ordered.
func (g *Builder) Alloc(b *Buffer, opts ...OpOption) *Op {
	return g.opOf(Alloc, Access{b.All(), Write}).With(opts...)
}

// Free frees temporary buffer b once every earlier use of it is done.
func (g *Builder) Free(b *Buffer, opts ...OpOption) *Op {
	return g.opOf(Free, Access{b.All(), Write}).With(opts...)
}

// Copy copies src to dst; the two views have the same size.
func (g *Builder) Copy(dst, src View, opts ...OpOption) *Op {
	return g.opOf(Copy, In(src), Out(dst)).With(opts...)
}

// Fill sets every element of dst, read as its buffer's DType, to v.
func (g *Builder) Fill(dst View, v float64, opts ...OpOption) *Op {
	o := g.opOf(Fill, Out(dst))
	o.FillValue = v
	return o.With(opts...)
}

// Launch runs kernel k over grid x block threads (for example
// Launch(k, Grid1(4), Threads(256), ...)). Each argument matches one
// parameter of k: an Access, View or *Buffer for a buffer parameter (a View
// or *Buffer takes the parameter's mode), a number for a scalar; an
// argument of another type is an *Error of Build whose cause is an
// *ArgTypeError. OpOptions among the arguments (Name, a Priority, ...)
// configure the op and match no parameter. Views of one launch may share
// bytes only when none of them is written, or when they are identical and
// the kernel works in place (every builtin but reduce_sum and matmul, and
// kernels of your own).
func (g *Builder) Launch(k *Kernel, grid, block Dim3, args ...any) *Op {
	o := g.op(Launch)
	o.Launch = g.newLaunch()
	*o.Launch = LaunchSpec{Kernel: k, Grid: grid, Block: block, Args: g.args(len(args))}
	nacc := 0
	for _, a := range args {
		switch a.(type) {
		case Access, View, *Buffer:
			nacc++
		}
	}
	if nacc > 0 {
		o.Access = g.accesses(nacc)
	}
	var opts []OpOption
	for _, a := range args {
		i := len(o.Launch.Args)
		var mode Mode = ReadWrite
		if k != nil && i < len(k.Params) && k.Params[i].Mode != 0 {
			mode = k.Params[i].Mode
		}
		arg := Arg{Access: -1}
		switch v := a.(type) {
		case Access:
			arg.Access = len(o.Access)
			o.Access = append(o.Access, v)
		case View:
			arg.Access = len(o.Access)
			o.Access = append(o.Access, Access{v, mode})
		case *Buffer:
			arg.Access = len(o.Access)
			o.Access = append(o.Access, Access{v.All(), mode})
		case int:
			arg.Int, arg.Float = int64(v), float64(v)
		case int32:
			arg.Int, arg.Float = int64(v), float64(v)
		case int64:
			arg.Int, arg.Float = v, float64(v)
		case float32:
			arg.Int, arg.Float = int64(v), float64(v)
		case float64:
			arg.Int, arg.Float = int64(v), v
		case OpOption:
			opts = append(opts, v)
			continue
		default:
			x := o.extra()
			x.argErrs = append(x.argErrs, &ArgTypeError{Index: i, Type: fmt.Sprintf("%T", a)})
		}
		o.Launch.Args = append(o.Launch.Args, arg)
	}
	return o.With(opts...)
}

// Host runs fn on the host once the steps before it are done. Its views
// are the accesses among opts (In, Out, InOut), in order: mem[i] of fn
// holds the bytes of the i-th, which must be host memory.
func (g *Builder) Host(fn HostFunc, opts ...OpOption) *Op {
	o := g.op(Host, g.accesses(accessCount(opts))...)
	o.HostFunc = fn
	return o.With(opts...)
}

// accessCount is the number of accesses among opts.
func accessCount(opts []OpOption) int {
	n := 0
	for _, o := range opts {
		if _, ok := o.(Access); ok {
			n++
		}
	}
	return n
}

// Grid1, Threads and Dim are shorthands for Dim3 values: Grid1(n) is a
// grid of n blocks, Threads(n) a block of n threads, both along x.
func Grid1(x int) Dim3 { return Dim3{x, 1, 1} }

// Threads is a block of n threads along x.
func Threads(n int) Dim3 { return Dim3{n, 1, 1} }

// Dim is the shape x by y by z.
func Dim(x, y, z int) Dim3 { return Dim3{x, y, z} }
