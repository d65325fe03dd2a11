package dagtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dagrun/dagrun/dag"
)

// Config says what Random may put into a graph.
type Config struct {
	Ops     int   // operations to declare (automatic allocs and frees come on top)
	Buffers int   // buffers to declare, at least 1
	Seed    int64 // the same Config gives the same graph
	// Ranges lets ops use element-aligned sub-ranges of buffers, not only
	// whole buffers, so that disjoint and partially overlapping views occur.
	Ranges bool
	// Priorities gives ops random priorities (mostly low, normal and high).
	Priorities bool
	// Temporaries makes some device buffers temporary: each is filled before
	// its first use, read into persistent buffers, and some are allocated and
	// freed by explicit ops in the middle of the graph.
	Temporaries bool
	// HostBuffers adds pinned and pageable host buffers, copies to and from
	// them, and host steps on them.
	HostBuffers bool
	Devices     int  // device buffers are spread over devices 0..Devices-1 (at least 1)
	After       bool // add random explicit After edges to earlier ops
	// Memset2D adds 2-D memsets: strided rows of a buffer, whose
	// dependencies come from their bounding ranges (dag.Memset2DSpec).
	Memset2D bool
	// Handoffs (with Temporaries) retires a temporary, now and then, by
	// copying all of it into an unused temporary of its size and memory:
	// one op is then the last use of one temporary and the first use of
	// another, the case where an arena may reuse bytes only if that op
	// uses neither while the other holds them.
	Handoffs bool
}

// maxBound keeps every element's magnitude below it, so float results stay
// finite and well away from rounding trouble whatever the graph's length.
const maxBound = 1 << 14

// Random returns a valid, executable graph made from cfg: f32 buffers,
// builtin kernel launches (iota, scale, axpy, add, reduce_sum), copies,
// fills and host steps, so that the results depend on the order the ops run
// in. Values stay bounded, and reductions are short, so results are exactly
// reproducible by any correct schedule.
func Random(cfg Config) *dag.Graph {
	gen := newGenerator(cfg)
	for gen.declared < gen.cfg.Ops {
		gen.step()
	}
	g, err := gen.b.Build()
	if err != nil {
		panic(fmt.Sprintf("dagtest: Random(%+v) made a graph dag.Build rejects: %v", cfg, err))
	}
	return g
}

// lifetime is where a temporary buffer is in its life.
type lifetime uint8

const (
	unused  lifetime = iota // not yet allocated or filled
	live                    // filled; ops may use it
	retired                 // used for the last time; no op may touch it again
)

// buffer is a declared buffer and what the generator knows of its contents.
type buffer struct {
	*dag.Buffer
	// bound is at least the magnitude of every element after the ops
	// declared so far, in declaration order (which every valid schedule
	// computes the same result as).
	bound    float64
	life     lifetime
	explicit bool // a temporary with explicit Alloc and Free ops
}

func (b *buffer) elems() int64 { return b.Size / 4 }

type generator struct {
	cfg      Config
	r        *rand.Rand
	b        *dag.Builder
	bufs     []*buffer
	ops      []*dag.Op // declared so far, for After edges
	declared int
}

func newGenerator(cfg Config) *generator {
	cfg.Ops = max(cfg.Ops, 0)
	cfg.Buffers = max(cfg.Buffers, 1)
	cfg.Devices = max(cfg.Devices, 1)
	gen := &generator{
		cfg: cfg,
		r:   rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6461677465737400)),
		b:   dag.New(),
	}
	for i := range cfg.Buffers {
		gen.declareBuffer(i)
	}
	return gen
}

// declareBuffer declares buffer i. Buffer 0 is always a persistent device
// buffer, so that every op kind has somewhere to go.
func (gen *generator) declareBuffer(i int) {
	r := gen.r
	var elems int64
	if gen.cfg.Ranges {
		elems = 16 * int64(1+r.IntN(8))
	} else {
		elems = 32 * int64(1+r.IntN(2)) // few sizes, so that equal-sized pairs are common
	}
	var opts []dag.BufferOption
	host := gen.cfg.HostBuffers && i > 0 && r.IntN(3) == 0
	temporary := gen.cfg.Temporaries && i > 0 && !host && r.IntN(3) == 0
	switch {
	case host && r.IntN(2) == 0:
		opts = append(opts, dag.PinnedHost())
	case host:
		opts = append(opts, dag.PageableHost())
	default:
		opts = append(opts, dag.OnDevice(r.IntN(gen.cfg.Devices)))
	}
	bound := 0.0
	switch {
	case temporary:
		opts = append(opts, dag.Temporary())
	case r.IntN(3) == 0:
		v := float64(r.IntN(9)-4) / 4
		opts = append(opts, dag.Value(v))
		bound = math.Abs(v)
	case r.IntN(2) == 0:
		opts = append(opts, dag.Random(r.Uint64()))
		bound = 1
	default:
		opts = append(opts, dag.Zeros())
	}
	name := fmt.Sprintf("b%d", i)
	if temporary {
		name = fmt.Sprintf("t%d", i)
	}
	b := gen.b.Buffer(name, elems*4, opts...)
	if host {
		b.Device = r.IntN(gen.cfg.Devices) // the device its copies mostly go to
	}
	gen.bufs = append(gen.bufs, &buffer{Buffer: b, bound: bound, explicit: temporary && r.IntN(2) == 0})
}

// step declares one op, with the ops a temporary needs before its first use
// and, now and then, a temporary's last use.
func (gen *generator) step() {
	kinds := []func() bool{gen.iota, gen.scale, gen.scale, gen.axpy, gen.axpy, gen.add, gen.add,
		gen.reduce, gen.copy, gen.copy, gen.fill, gen.host, gen.host}
	if gen.cfg.Memset2D {
		kinds = append(kinds, gen.memset2D)
	}
	done := false
	for range 32 {
		if done = kinds[gen.r.IntN(len(kinds))](); done {
			break
		}
	}
	if !done { // a fill of buffer 0, a persistent device buffer, always fits
		gen.emit(gen.b.Fill(gen.bufs[0].All(), 1))
		gen.bufs[0].bound = 1
	}
	if gen.cfg.Temporaries && gen.r.IntN(8) == 0 {
		gen.retire()
	}
}

// emit finishes an op declared with the Builder: priority, After edges and
// the count.
func (gen *generator) emit(o *dag.Op) *dag.Op {
	r := gen.r
	if gen.cfg.Priorities {
		switch n := r.IntN(10); {
		case n < 3:
			o.With(dag.Low)
		case n < 6:
			o.With(dag.Normal)
		case n < 9:
			o.With(dag.High)
		default:
			o.With(dag.Priority(r.IntN(7) - 3))
		}
	}
	if gen.cfg.After && len(gen.ops) > 0 && r.IntN(5) == 0 {
		for range 1 + r.IntN(2) {
			o.With(dag.After(gen.ops[r.IntN(len(gen.ops))]))
		}
	}
	gen.ops = append(gen.ops, o)
	gen.declared++
	return o
}

// pick returns a random usable buffer that ok accepts and, for n > 0, that
// holds at least n elements (exactly n without Ranges), or nil. Choosing an unused temporary
// makes it live first.
func (gen *generator) pick(n int64, ok func(*buffer) bool) *buffer {
	fits := func(b *buffer) bool {
		size := b.elems() >= n
		if n > 0 && !gen.cfg.Ranges {
			size = b.elems() == n
		}
		return b.life != retired && size && ok(b)
	}
	// Reservoir sampling: each fitting buffer is chosen with equal chance.
	var chosen *buffer
	seen := 0
	for _, b := range gen.bufs {
		if fits(b) {
			seen++
			if gen.r.IntN(seen) == 0 {
				chosen = b
			}
		}
	}
	if chosen != nil {
		gen.activate(chosen)
	}
	return chosen
}

// activate makes a temporary live: an explicit Alloc where it has one, then
// a fill of all of it, so that every later read sees defined contents.
func (gen *generator) activate(b *buffer) {
	if !b.Temporary || b.life != unused {
		return
	}
	b.life = live
	if b.explicit {
		gen.emit(gen.b.Alloc(b.Buffer))
	}
	v := float64(gen.r.IntN(5)) / 2
	gen.emit(gen.b.Fill(b.All(), v))
	b.bound = v
}

// retire reads one live temporary into a persistent buffer for the last
// time, then frees it where it has an explicit Free.
func (gen *generator) retire() {
	var lives []*buffer
	for _, b := range gen.bufs {
		if b.Temporary && b.life == live {
			lives = append(lives, b)
		}
	}
	if len(lives) == 0 {
		return
	}
	t := lives[gen.r.IntN(len(lives))]
	if gen.cfg.Handoffs && gen.r.IntN(2) == 0 && gen.handoff(t) {
		return
	}
	n := gen.length(t.elems())
	if dst := gen.pick(n, func(b *buffer) bool { return !b.Temporary }); dst != nil {
		gen.copyInto(dst, gen.view(dst, n), t, gen.view(t, n))
	}
	t.life = retired
	if t.explicit {
		gen.emit(gen.b.Free(t.Buffer))
	}
}

// handoff retires t by copying all of it into an unused temporary of its
// size in its memory, which that copy makes live (no fill first), and
// reports whether there was one.
func (gen *generator) handoff(t *buffer) bool {
	var next *buffer
	for _, b := range gen.bufs {
		if b != t && b.Temporary && b.life == unused && b.Size == t.Size && b.Placement == t.Placement && b.Device == t.Device {
			next = b
			break
		}
	}
	if next == nil {
		return false
	}
	next.life = live
	if next.explicit {
		gen.emit(gen.b.Alloc(next.Buffer))
	}
	gen.copyInto(next, next.All(), t, t.All())
	t.life = retired
	if t.explicit {
		gen.emit(gen.b.Free(t.Buffer))
	}
	return true
}

// length is a random element count for a view of a buffer of elems elements.
func (gen *generator) length(elems int64) int64 {
	if !gen.cfg.Ranges || gen.r.IntN(3) == 0 {
		return elems
	}
	return 1 + gen.r.Int64N(elems)
}

// view is a random view of n elements of b.
func (gen *generator) view(b *buffer, n int64) dag.View {
	off := gen.r.Int64N(b.elems() - n + 1)
	return b.Slice(off*4, n*4)
}

// disjointView is a view of n elements of b that overlaps none of others,
// or false after a few tries.
func (gen *generator) disjointView(b *buffer, n int64, others ...dag.View) (dag.View, bool) {
	for range 4 {
		v := gen.view(b, n)
		clear := true
		for _, o := range others {
			clear = clear && !v.Overlaps(o)
		}
		if clear {
			return v, true
		}
	}
	return dag.View{}, false
}

// set records that a write of view v leaves its elements bounded by bound.
func set(b *buffer, v dag.View, bound float64) {
	if v.Size == b.Size {
		b.bound = bound
	} else {
		b.bound = max(b.bound, bound)
	}
}

// tame replaces an op that would make values too large: it fills all of
// its output buffer instead, which resets the bound.
func (gen *generator) tame(b *buffer, bound float64) bool {
	if bound < maxBound {
		return false
	}
	gen.emit(gen.b.Fill(b.All(), 1))
	b.bound = 1
	return true
}

func onDevice(b *buffer) bool { return b.Placement == dag.Device }

func grid(r *rand.Rand) (dag.Dim3, dag.Dim3) {
	return dag.Grid1(1 + r.IntN(4)), dag.Threads(32 << r.IntN(4))
}

// sameDevice accepts device buffers of x's device.
func sameDevice(x *buffer) func(*buffer) bool {
	return func(b *buffer) bool { return onDevice(b) && b.Device == x.Device }
}

func (gen *generator) iota() bool {
	x := gen.pick(0, onDevice)
	if x == nil {
		return false
	}
	n := gen.length(x.elems())
	v := gen.view(x, n)
	start := float64(gen.r.IntN(17) - 8)
	if gen.tame(x, math.Abs(start)+float64(n)) {
		return true
	}
	gr, bl := grid(gen.r)
	gen.emit(gen.b.Launch(dag.Iota, gr, bl, v, start))
	set(x, v, math.Abs(start)+float64(n))
	return true
}

func (gen *generator) scale() bool {
	x := gen.pick(0, onDevice)
	if x == nil {
		return false
	}
	v := gen.view(x, gen.length(x.elems()))
	alpha := 0.5 + float64(gen.r.IntN(9))/8 // [0.5, 1.5] in steps that f32 holds exactly
	if gen.tame(x, x.bound*alpha) {
		return true
	}
	gr, bl := grid(gen.r)
	gen.emit(gen.b.Launch(dag.Scale, gr, bl, v, alpha))
	if v.Size == x.Size {
		x.bound *= alpha
	} else {
		x.bound *= max(1, alpha)
	}
	return true
}

func (gen *generator) axpy() bool {
	y := gen.pick(0, onDevice)
	if y == nil {
		return false
	}
	n := gen.length(y.elems())
	x := gen.pick(n, sameDevice(y))
	if x == nil {
		return false
	}
	yv := gen.view(y, n)
	xv, ok := gen.disjointView(x, n, yv)
	if !ok {
		return false
	}
	alpha := float64(gen.r.IntN(9)-4) / 8
	bound := y.bound + math.Abs(alpha)*x.bound
	if gen.tame(y, bound) {
		return true
	}
	gr, bl := grid(gen.r)
	gen.emit(gen.b.Launch(dag.Axpy, gr, bl, yv, xv, alpha))
	y.bound = max(y.bound, bound)
	return true
}

func (gen *generator) add() bool {
	c := gen.pick(0, onDevice)
	if c == nil {
		return false
	}
	n := gen.length(c.elems())
	a := gen.pick(n, sameDevice(c))
	b := gen.pick(n, sameDevice(c))
	if a == nil || b == nil {
		return false
	}
	cv := gen.view(c, n)
	av, ok1 := gen.disjointView(a, n, cv)
	bv, ok2 := gen.disjointView(b, n, cv)
	if !ok1 || !ok2 {
		return false
	}
	bound := a.bound + b.bound
	if gen.tame(c, bound) {
		return true
	}
	gr, bl := grid(gen.r)
	gen.emit(gen.b.Launch(dag.Add, gr, bl, cv, av, bv))
	set(c, cv, bound)
	return true
}

// reduce sums at most 32 elements into one, so that the f64 accumulation is
// exact and every backend's order of summation gives the same f32.
func (gen *generator) reduce() bool {
	out := gen.pick(0, onDevice)
	if out == nil {
		return false
	}
	n := min(gen.length(out.elems()), 32)
	in := gen.pick(n, sameDevice(out))
	if in == nil {
		return false
	}
	iv := gen.view(in, n)
	outElems := out.elems() // without Ranges, views are whole buffers
	if gen.cfg.Ranges {
		outElems = 1
	}
	ov, ok := gen.disjointView(out, outElems, iv)
	if !ok {
		return false
	}
	// Only out[0] changes: the other elements keep their values.
	bound := max(out.bound, float64(n)*in.bound)
	if gen.tame(out, bound) {
		return true
	}
	gr, bl := grid(gen.r)
	gen.emit(gen.b.Launch(dag.ReduceSum, gr, bl, ov, iv))
	out.bound = bound
	return true
}

func (gen *generator) copy() bool {
	dst := gen.pick(0, func(*buffer) bool { return true })
	if dst == nil {
		return false
	}
	n := gen.length(dst.elems())
	src := gen.pick(n, func(*buffer) bool { return true })
	if src == nil {
		return false
	}
	dv := gen.view(dst, n)
	sv, ok := gen.disjointView(src, n, dv)
	if !ok {
		return false
	}
	gen.copyInto(dst, dv, src, sv)
	return true
}

func (gen *generator) copyInto(dst *buffer, dv dag.View, src *buffer, sv dag.View) {
	o := gen.emit(gen.b.Copy(dv, sv))
	if dst.Placement.Host() && src.Placement.Host() {
		o.With(dag.OnDevice(src.Device))
	}
	set(dst, dv, src.bound)
}

func (gen *generator) fill() bool {
	x := gen.pick(0, func(*buffer) bool { return true })
	if x == nil {
		return false
	}
	v := gen.view(x, gen.length(x.elems()))
	val := float64(gen.r.IntN(9)-4) / 4
	o := gen.emit(gen.b.Fill(v, val))
	if x.Placement.Host() {
		o.With(dag.OnDevice(x.Device))
	}
	set(x, v, math.Abs(val))
	return true
}

// memset2D sets a few strided rows of a buffer: gaps between the rows keep
// their values, so the bound only grows.
func (gen *generator) memset2D() bool {
	x := gen.pick(0, func(*buffer) bool { return true })
	if x == nil {
		return false
	}
	n := gen.length(x.elems())
	rows := 1 + gen.r.Int64N(min(n, 4))
	pitch := n / rows // elements: rows of at most pitch fit in n
	width := 1 + gen.r.Int64N(pitch)
	v := gen.view(x, (rows-1)*pitch+width)
	val := float64(gen.r.IntN(9)-4) / 4
	m := dag.Memset2DSpec{Rows: int(rows), Width: int(width), Pitch: pitch * 4}
	o := gen.emit(gen.b.Memset2D(v, m, val))
	if x.Placement.Host() {
		o.With(dag.OnDevice(x.Device))
	}
	x.bound = max(x.bound, math.Abs(val))
	return true
}

// host declares a host step: either x += 1 over one view, or y = x/2 + 1
// from one view into another of the same size.
func (gen *generator) host() bool {
	onHost := func(b *buffer) bool { return b.Placement.Host() }
	y := gen.pick(0, onHost)
	if y == nil {
		return false
	}
	n := gen.length(y.elems())
	yv := gen.view(y, n)
	if gen.r.IntN(2) == 0 {
		if gen.tame(y, y.bound+1) {
			return true
		}
		gen.emit(gen.b.Host(addOne, dag.InOut(yv))).With(dag.OnDevice(y.Device))
		set(y, yv, y.bound+1)
		return true
	}
	x := gen.pick(n, onHost)
	if x == nil {
		return false
	}
	xv, ok := gen.disjointView(x, n, yv)
	if !ok {
		return false
	}
	bound := x.bound/2 + 1
	gen.emit(gen.b.Host(halfPlusOne, dag.Out(yv), dag.In(xv))).With(dag.OnDevice(y.Device))
	set(y, yv, bound)
	return true
}

// addOne adds 1 to every f32 of every view it is given.
func addOne(_ context.Context, mem [][]byte) error {
	for _, m := range mem {
		for i := 0; i+4 <= len(m); i += 4 {
			putF32(m[i:], getF32(m[i:])+1)
		}
	}
	return nil
}

// halfPlusOne sets mem[0][i] = mem[1][i]/2 + 1, over f32 elements.
func halfPlusOne(_ context.Context, mem [][]byte) error {
	out, in := mem[0], mem[1]
	if len(out) != len(in) {
		return fmt.Errorf("views of %d and %d bytes; need equal sizes", len(out), len(in))
	}
	for i := 0; i+4 <= len(out); i += 4 {
		putF32(out[i:], getF32(in[i:])/2+1)
	}
	return nil
}

func getF32(b []byte) float32    { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
func putF32(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }
