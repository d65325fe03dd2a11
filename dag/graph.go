package dag

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/emirpasic/gods/trees/binaryheap"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// Graph is a checked set of buffers, kernels and operations with their
// dependencies. Ops are in a topological order: every Dep is smaller than
// the op's ID. Graphs are read-only once built.
type Graph struct {
	Buffers []*Buffer
	Kernels []*Kernel // the kernels the ops launch, builtins included
	Ops     []*Op
}

// Limits of a launch that hold on every CUDA device dagrun supports.
const (
	maxBlockThreads = 1024
	maxSharedBytes  = 48 << 10
)

// Build checks the declarations and returns the graph with its dependencies.
// The error, if any, joins one *Error per problem (see Errors).
func (g *Builder) Build() (*Graph, error) {
	errs := slices.Clone(g.errs)
	bad := func(e *Error) { errs = append(errs, e) }

	names := map[string]bool{}
	for _, b := range g.bufs {
		checkBuffer(b, names, bad)
	}
	for i, o := range g.ops {
		if o.Name == "" {
			o.Name = fmt.Sprintf("%s%d", o.Kind, i)
			if o.Kind == Launch && o.Launch.Kernel != nil {
				o.Name = fmt.Sprintf("%s%d", o.Launch.Kernel.Name, i)
			}
		}
	}
	opNames := make(map[string]*Op, len(g.ops))
	for _, o := range g.ops {
		if opNames[o.Name] != nil {
			bad(&Error{Op: o.Name, Msg: "name is used by two operations", Hint: "give each operation its own name"})
		}
		opNames[o.Name] = o
	}
	owned := func(b *Buffer) bool { return b != nil && b.ID < len(g.bufs) && g.bufs[b.ID] == b }
	for _, o := range g.ops {
		g.checkOp(o, owned, bad)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	ops, lifeErrs := withLifetimes(g.ops, len(g.bufs))
	for _, e := range lifeErrs {
		bad(e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, o := range ops {
		o.ID = i
	}
	inferDeps(ops, len(g.bufs))
	chainOrdered(ops)
	ops, err := addAfter(ops)
	if err != nil {
		return nil, err
	}
	return &Graph{Buffers: g.bufs, Kernels: g.usedKernels(ops), Ops: ops}, nil
}

func checkBuffer(b *Buffer, names map[string]bool, bad func(*Error)) {
	switch {
	case b.Name == "":
		bad(&Error{Buffer: fmt.Sprintf("#%d", b.ID), Msg: "buffer has no name"})
	case names[b.Name]:
		bad(&Error{Buffer: b.Name, Msg: "name is used by two buffers", Hint: "give each buffer its own name"})
	}
	names[b.Name] = true
	if b.Size <= 0 {
		bad(&Error{Buffer: b.Name, Field: "size", Msg: fmt.Sprintf("size %d is not positive", b.Size)})
	}
	if b.Device < 0 {
		bad(&Error{Buffer: b.Name, Field: "device", Msg: fmt.Sprintf("device %d is negative", b.Device)})
	}
	if b.Init.Kind == InitBytes && int64(len(b.Init.Data)) != b.Size {
		bad(&Error{Buffer: b.Name, Field: "init", Msg: fmt.Sprintf("initial contents hold %d bytes, the buffer %d", len(b.Init.Data), b.Size),
			Hint: "make the file as large as the buffer, or the buffer as large as the file"})
	}
	if b.Temporary && b.Init.Kind != InitNone {
		bad(&Error{Buffer: b.Name, Field: "init", Msg: "a temporary buffer has no initial contents",
			Hint: "fill it with an op after it is allocated, or make it persistent"})
	}
	if (b.Init.Kind == InitValue || b.Init.Kind == InitRandom) && b.Size%b.DType.Size() != 0 {
		bad(&Error{Buffer: b.Name, Field: "size", Msg: fmt.Sprintf("size %d is not a whole number of %s elements", b.Size, b.DType)})
	}
}

func (g *Builder) checkOp(o *Op, owned func(*Buffer) bool, bad func(*Error)) {
	fail := func(field, hint, format string, a ...any) {
		bad(&Error{Op: o.Name, Field: field, Msg: fmt.Sprintf(format, a...), Hint: hint})
	}
	for i, a := range o.Access {
		if !owned(a.Buf) {
			fail("", "declare buffers with the same Builder", "access %d uses a buffer this graph does not declare", i)
			return
		}
		if a.Offset < 0 || a.Size <= 0 || a.End() > a.Buf.Size {
			fail("", fmt.Sprintf("%s holds bytes [0:%d)", a.Buf.Name, a.Buf.Size),
				"view [%d:%d) of %s is out of range", a.Offset, a.End(), a.Buf.Name)
			return
		}
		if a.Mode&^ReadWrite != 0 || a.Mode == 0 {
			fail("", "use in, out or inout", "access %d of %s has mode %d", i, a.Buf.Name, a.Mode)
		}
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
		fail("device", "", "device %d is negative", o.Device)
	}
	for _, p := range o.after {
		switch {
		case p == nil || p.ID >= len(g.ops) || g.ops[p.ID] != p:
			fail("after", "", "after names an operation this graph does not declare")
		case p == o:
			fail("after", "remove it from its own after list", "operation is after itself")
		}
	}
	switch o.Kind {
	case Alloc, Free:
		if b := o.Buffer(); !b.Temporary {
			fail("", "declare it temporary to allocate it inside the run", "%s of persistent buffer %s", o.Kind, b.Name)
		}
	case Copy:
		if src, dst := o.Access[0], o.Access[1]; src.Size != dst.Size {
			fail("", "copy views of equal size", "copy of %d bytes from %s into %d bytes of %s", src.Size, src.View, dst.Size, dst.View)
		} else if src.Overlaps(dst.View) {
			fail("", "copy between disjoint ranges", "source %s and destination %s overlap", src.View, dst.View)
		}
	case Fill:
		v := o.Access[0]
		es := v.Buf.DType.Size()
		if v.Offset%es != 0 || v.Size%es != 0 {
			fail("", "fill whole elements", "view %s is not aligned to %s elements (%d bytes)", v.View, v.Buf.DType, es)
		}
	case Launch:
		g.checkLaunch(o, fail)
	case Host:
		if o.HostFunc == nil {
			fail("", "", "host step has no function")
		}
		for _, a := range o.Access {
			if !a.Buf.Placement.Host() {
				fail("", fmt.Sprintf("copy %s to a pinned host buffer first", a.Buf.Name),
					"host step uses device buffer %s", a.Buf.Name)
			}
		}
	case AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv:
		checkCollective(o, fail)
	default:
		fail("", "", "unknown kind %d", o.Kind)
	}
}

func (g *Builder) checkLaunch(o *Op, fail func(field, hint, format string, a ...any)) {
	l := o.Launch
	k := l.Kernel
	if k == nil {
		fail("kernel", "name a builtin kernel or declare one", "launch has no kernel")
		return
	}
	if k.Source != Builtin && !slices.Contains(g.kernels, k) {
		fail("kernel", "declare the kernel with Builder.Kernel", "kernel %s is not declared", k.Name)
	}
	for _, d := range []struct {
		name string
		dim  Dim3
	}{{"grid", l.Grid}, {"block", l.Block}} {
		if d.dim.X < 1 || d.dim.Y < 1 || d.dim.Z < 1 {
			fail(d.name, "every dimension is at least 1", "%s %s has a dimension below 1", d.name, d.dim)
		}
	}
	if b := l.Block; b.X > 1024 || b.Y > 1024 || b.Z > 64 || b.Count() > maxBlockThreads {
		fail("block", "use at most 1024 threads per block (x, y <= 1024, z <= 64)", "block %s is too large", b)
	}
	if gr := l.Grid; gr.X > 1<<31-1 || gr.Y > 65535 || gr.Z > 65535 {
		fail("grid", "grid x <= 2^31-1, y and z <= 65535", "grid %s is too large", gr)
	}
	if l.Shared < 0 || l.Shared > maxSharedBytes {
		fail("shared", "use at most 48 KiB of dynamic shared memory", "%d bytes of shared memory", l.Shared)
	}
	if len(l.Args) != len(k.Params) {
		names := make([]string, len(k.Params))
		for i, p := range k.Params {
			names[i] = p.Name + " " + p.Kind.String()
		}
		fail("args", fmt.Sprintf("%s takes (%s)", k.Name, strings.Join(names, ", ")),
			"%d arguments for %d parameters", len(l.Args), len(k.Params))
		return
	}
	ok := true
	for i, p := range k.Params {
		a := l.Args[i]
		field := "args." + p.Name
		if (p.Kind == BufferParam) != (a.Access >= 0) {
			want := "a number"
			if p.Kind == BufferParam {
				want = "a buffer"
			}
			fail(field, "", "parameter %s takes %s", p.Name, want)
			ok = false
			continue
		}
		if p.Kind != BufferParam {
			if p.Kind == I32Param && (a.Int < -1<<31 || a.Int > 1<<31-1) {
				fail(field, "", "%d does not fit in i32", a.Int)
			}
			continue
		}
		acc := o.Access[a.Access]
		if acc.Buf.Placement != Device || acc.Buf.Device != o.Device {
			fail(field, fmt.Sprintf("copy it to a buffer on device %d first", o.Device),
				"%s is %s memory, not memory of device %d", acc.Buf.Name, placeName(acc.Buf), o.Device)
			ok = false
		}
		if p.Mode != 0 && acc.Mode|p.Mode != acc.Mode {
			fail(field, fmt.Sprintf("pass it as %s", p.Mode), "%s is passed as %s, but %s %s it", acc.View, acc.Mode, k.Name, modeVerb(p.Mode))
			ok = false
		}
		if k.Source == Builtin && (acc.Offset%4 != 0 || acc.Size%4 != 0) {
			fail(field, "builtin kernels work on f32 elements", "view %s is not a whole number of f32 elements", acc.View)
			ok = false
		}
	}
	if ok && k.check != nil {
		if err := k.check(o); err != nil {
			fail("args", "", "%v", err)
		}
	}
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

func (g *Builder) usedKernels(ops []*Op) []*Kernel {
	var ks []*Kernel
	seen := map[*Kernel]bool{}
	for _, o := range ops {
		if o.Kind == Launch && !seen[o.Launch.Kernel] {
			seen[o.Launch.Kernel] = true
			ks = append(ks, o.Launch.Kernel)
		}
	}
	return ks
}

// withLifetimes checks the use of temporary buffers against their Alloc and
// Free ops and adds the ones a buffer lacks: an Alloc just before its first
// use, a Free just after its last.
func withLifetimes(ops []*Op, nbufs int) ([]*Op, []*Error) {
	type life struct {
		alloc, free   *Op
		first, last   int
		explicitAlloc bool
	}
	lives := make([]life, nbufs)
	for i := range lives {
		lives[i].first = -1
	}
	var errs []*Error
	for i, o := range ops {
		switch o.Kind {
		case Alloc:
			l := &lives[o.Buffer().ID]
			switch {
			case l.free != nil:
				errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf("%s is allocated again after %s freed it", o.Buffer().Name, l.free.Name), Hint: "use another temporary buffer"})
			case l.alloc != nil:
				errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf("%s is already allocated by %s", o.Buffer().Name, l.alloc.Name), Hint: "remove one of the allocs"})
			case l.first >= 0:
				errs = append(errs, &Error{Op: ops[l.first].Name, Msg: fmt.Sprintf("uses %s before %s allocates it", o.Buffer().Name, o.Name), Hint: "move the alloc before the first use"})
			}
			l.alloc, l.explicitAlloc = o, true
			continue
		case Free:
			l := &lives[o.Buffer().ID]
			switch {
			case l.free != nil:
				errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf("%s is already freed by %s", o.Buffer().Name, l.free.Name), Hint: "remove one of the frees"})
			case l.alloc == nil && l.first < 0:
				errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf("frees %s, which nothing allocated or used", o.Buffer().Name), Hint: "remove the free"})
			}
			l.free = o
			continue
		}
		for _, a := range o.Access {
			if !a.Buf.Temporary {
				continue
			}
			l := &lives[a.Buf.ID]
			if l.free != nil {
				errs = append(errs, &Error{Op: o.Name, Msg: fmt.Sprintf("uses %s after %s freed it", a.Buf.Name, l.free.Name), Hint: "move the free after the last use"})
			}
			if l.first < 0 {
				l.first = i
			}
			l.last = i
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	before := make(map[int][]*Op) // op index -> allocs to insert before it
	after := make(map[int][]*Op)  // op index -> frees to insert after it
	for id := range lives {
		l := &lives[id]
		if l.first < 0 {
			continue
		}
		b := ops[l.first].bufferByID(id)
		if l.alloc == nil {
			a := &Op{Kind: Alloc, Name: "alloc:" + b.Name, Access: []Access{{b.All(), Write}}, Device: b.Device}
			before[l.first] = append(before[l.first], a)
		}
		if l.free == nil {
			f := &Op{Kind: Free, Name: "free:" + b.Name, Access: []Access{{b.All(), Write}}, Device: b.Device}
			after[l.last] = append(after[l.last], f)
		}
	}
	if len(before) == 0 && len(after) == 0 {
		return ops, nil
	}
	out := make([]*Op, 0, len(ops)+len(before)+len(after))
	for i, o := range ops {
		out = append(out, before[i]...)
		out = append(out, o)
		out = append(out, after[i]...)
	}
	return out, nil
}

func (o *Op) bufferByID(id int) *Buffer {
	for _, a := range o.Access {
		if a.Buf.ID == id {
			return a.Buf
		}
	}
	return nil
}

// segment is a byte range of a buffer with the last op that wrote it and the
// ops that read it since.
type segment struct {
	start, end int64
	writer     int32
	readers    []int32
}

// inferDeps sets every op's Deps from its accesses, in declaration order.
func inferDeps(ops []*Op, nbufs int) {
	segs := make([][]segment, nbufs)
	mark := make([]int32, len(ops)) // mark[d] == i+1: d is already a dep of op i
	for i, o := range ops {
		me := int32(i)
		add := func(d int32) {
			if d >= 0 && d != me && mark[d] != me+1 {
				mark[d] = me + 1
				o.Deps = append(o.Deps, d)
			}
		}
		for _, a := range o.Access {
			s := segs[a.Buf.ID]
			if s == nil {
				s = []segment{{start: 0, end: a.Buf.Size, writer: -1}}
			}
			s = split(s, a.Offset)
			s = split(s, a.End())
			lo := sort.Search(len(s), func(j int) bool { return s[j].start >= a.Offset })
			hi := sort.Search(len(s), func(j int) bool { return s[j].start >= a.End() })
			for j := lo; j < hi; j++ {
				add(s[j].writer)
				if a.Mode.Writes() {
					for _, r := range s[j].readers {
						add(r)
					}
				}
			}
			if a.Mode.Writes() {
				s = slices.Replace(s, lo, hi, segment{start: a.Offset, end: a.End(), writer: me})
			} else {
				for j := lo; j < hi; j++ {
					if n := len(s[j].readers); n == 0 || s[j].readers[n-1] != me {
						s[j].readers = append(s[j].readers, me)
					}
				}
			}
			segs[a.Buf.ID] = s
		}
	}
}

// split makes sure a segment of s starts at off.
func split(s []segment, off int64) []segment {
	j := sort.Search(len(s), func(j int) bool { return s[j].end > off })
	if j == len(s) || s[j].start == off {
		return s
	}
	left, right := s[j], s[j]
	left.end, right.start = off, off
	left.readers = slices.Clone(s[j].readers)
	return slices.Insert(slices.Delete(s, j, j+1), j, left, right)
}

// addAfter adds the explicit After edges. When one points forward the ops are
// put into a topological order again (declaration order where possible); a
// cycle is an error naming its ops.
func addAfter(ops []*Op) ([]*Op, error) {
	forward := false
	for _, o := range ops {
		for _, p := range o.after {
			if !slices.Contains(o.Deps, int32(p.ID)) {
				o.Deps = append(o.Deps, int32(p.ID))
			}
			forward = forward || p.ID >= o.ID
		}
	}
	if !forward {
		return ops, nil
	}
	// Kahn's algorithm, taking the earliest declared ready op first.
	indeg := make([]int, len(ops))
	succ := make([][]int32, len(ops))
	for _, o := range ops {
		for _, d := range o.Deps {
			indeg[o.ID]++
			succ[d] = append(succ[d], int32(o.ID))
		}
	}
	ready := binaryheap.NewWithIntComparator()
	for i, n := range indeg {
		if n == 0 {
			ready.Push(i)
		}
	}
	order := make([]*Op, 0, len(ops))
	for !ready.Empty() {
		v, _ := ready.Pop()
		i := v.(int)
		order = append(order, ops[i])
		for _, s := range succ[i] {
			if indeg[s]--; indeg[s] == 0 {
				ready.Push(int(s))
			}
		}
	}
	if len(order) < len(ops) {
		return nil, cycleError(ops, indeg)
	}
	newID := make([]int32, len(ops))
	for i, o := range order {
		newID[o.ID] = int32(i)
	}
	for i, o := range order {
		for j, d := range o.Deps {
			o.Deps[j] = newID[d]
		}
		o.ID = i
	}
	return order, nil
}

// cycleError names the ops of one cycle among the ops Kahn's algorithm could
// not order.
func cycleError(ops []*Op, indeg []int) error {
	g := simple.NewDirectedGraph()
	for _, o := range ops {
		if indeg[o.ID] == 0 {
			continue
		}
		for _, d := range o.Deps {
			if indeg[d] > 0 {
				g.SetEdge(g.NewEdge(simple.Node(d), simple.Node(o.ID)))
			}
		}
	}
	for _, scc := range topo.TarjanSCC(g) {
		if len(scc) < 2 {
			continue
		}
		ids := make([]int, len(scc))
		for i, n := range scc {
			ids[i] = int(n.ID())
		}
		slices.Sort(ids)
		cyc := cyclePath(ops, ids)
		names := make([]string, len(cyc))
		for i, id := range cyc {
			names[i] = ops[id].Name
		}
		return &Error{Op: names[0], Field: "after", Msg: "dependency cycle: " + strings.Join(names, " -> "),
			Hint: "remove one of these after edges or reorder the operations"}
	}
	return &Error{Msg: "dependency cycle", Hint: "remove an after edge"}
}

// cyclePath walks the strongly connected component ids from its first op
// along dependencies until it returns, giving the cycle in execution order.
func cyclePath(ops []*Op, ids []int) []int {
	in := map[int]bool{}
	for _, id := range ids {
		in[id] = true
	}
	start := ids[0]
	path := []int{start}
	seen := map[int]int{start: 0}
	cur := start
	for {
		next := -1
		for _, d := range ops[cur].Deps {
			if in[int(d)] {
				next = int(d)
				break
			}
		}
		if at, ok := seen[next]; ok {
			cyc := append(path[at:], next)
			slices.Reverse(cyc)
			return cyc
		}
		seen[next] = len(path)
		path = append(path, next)
		cur = next
	}
}
