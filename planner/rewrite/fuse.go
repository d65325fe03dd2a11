package rewrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
)

// Fuse returns g with each gemm and the launches of bias_add, then gelu
// or relu, that follow it on its output made one gemm with an epilogue
// (findFusions), named after all its parts ("fc1+bias1+gelu"); the
// declared ops each op of it runs, from parts (nil: g's ops are the
// declared ones); and one line for people on what it fused and what it
// could not. Where nothing fuses, g and parts come back as they are.
func Fuse(g *dag.Graph, parts [][]int32) (*dag.Graph, [][]int32, string) {
	groups, misses := findFusions(g)
	var b strings.Builder
	launches := 0
	for _, gr := range groups {
		launches += len(gr.parts) - 1
	}
	if len(groups) == 0 {
		b.WriteString("nothing fused")
	} else {
		b.WriteString(human.Count(len(groups), "gemm", "gemms") + " fused with " + human.Count(launches, "launch", "launches"))
	}
	for i, m := range misses {
		if i == maxMissesShown {
			fmt.Fprintf(&b, "; %d more not fused", len(misses)-i)
			break
		}
		fmt.Fprintf(&b, "; %s not fused: %s", m.op, m.why)
	}
	if len(groups) > 0 {
		g, parts = fuseGraph(g, groups, parts)
	}
	return g, parts, b.String()
}

// maxMissesShown bounds the fusions not made that the pass's summary names.
const maxMissesShown = 3

// fusion is one gemm and the launches that fuse into it, in order.
type fusion struct {
	parts    []int32 // op IDs: the gemm first
	epilogue dag.Epilogue
	bias     dag.View // the bias_add's b, when one is fused
}

// miss is a launch that could finish a gemm but does not fuse, and why.
type miss struct{ op, why string }

// findFusions finds, for each gemm, the launches that fuse into it: the
// next op to use its output's bytes (which depends on the gemm, since
// the gemm writes all of them) must be a bias_add adding one element per
// column in place, or a gelu or relu in place, on the same device at the
// same priority, whose other dependencies all come before the gemm, so
// that the fused op, in the gemm's place, computes what the ops did
// where they were. The next op to use the output after it may fuse too,
// while the epilogue stays one cuBLASLt has: a bias, then an activation.
func findFusions(g *dag.Graph) ([]fusion, []miss) {
	if !slices.ContainsFunc(g.Ops, func(op *dag.Op) bool { return op != nil && op.Kind == dag.Gemm }) {
		return nil, nil // the common case of graphs without GEMMs costs one scan
	}
	users := dependents(g)
	var groups []fusion
	var misses []miss
	var parts []int32 // the fusions' parts, cut from one slice
	for i, op := range g.Ops {
		if op == nil || op.Kind != dag.Gemm || !buffersNamed(op) || dag.CheckGemmViews(op) != nil {
			continue
		}
		out, ok := denseOutput(op)
		if !ok {
			continue
		}
		if cap(parts)-len(parts) < 4 {
			parts = make([]int32, 0, max(64, 2*cap(parts)))
		}
		f := fusion{parts: append(parts[len(parts):], int32(i)), epilogue: op.Gemm.Epilogue}
		last := int32(i)
		for {
			next := nextUser(g, users.of(last), out)
			if next < 0 {
				break
			}
			e, bias, why := fusesInto(g, &f, next, out)
			if why != "" {
				if why != notACandidate {
					misses = append(misses, miss{op: g.Ops[next].Name, why: why})
				}
				break
			}
			f.parts = append(f.parts, next)
			f.epilogue = e
			if bias.Buf != nil {
				f.bias = bias
			}
			last = next
		}
		if len(f.parts) > 1 {
			f.parts = f.parts[:len(f.parts):len(f.parts)]
			groups = append(groups, f)
			if len(f.parts) <= cap(parts)-len(parts) {
				parts = parts[:len(parts)+len(f.parts)] // kept: the next fusion starts after it
			}
		}
	}
	return groups, misses
}

// buffersNamed reports whether every access of op names a buffer, as
// those of a graph Build made do.
func buffersNamed(op *dag.Op) bool {
	for _, a := range op.Access {
		if a.Buf == nil {
			return false
		}
	}
	return true
}

// notACandidate is fusesInto's reason for an op that is no builtin a gemm
// can take as an epilogue: the gemm's output is simply used.
const notACandidate = "-"

// users lists, for each op, the ops that depend on it, in ID order: those
// of op i are list[off[i]:off[i+1]].
type users struct{ off, list []int32 }

func (u users) of(i int32) []int32 { return u.list[u.off[i]:u.off[i+1]] }

// dependents lists, for each op, the ops that depend on it.
func dependents(g *dag.Graph) users {
	off := make([]int32, len(g.Ops)+1)
	for i, op := range g.Ops {
		if op == nil {
			continue
		}
		for _, d := range op.Deps {
			if d >= 0 && int(d) < i {
				off[d+1]++
			}
		}
	}
	for i := range g.Ops {
		off[i+1] += off[i]
	}
	list := make([]int32, off[len(g.Ops)])
	next := make([]int32, len(g.Ops))
	copy(next, off)
	for i, op := range g.Ops {
		if op == nil {
			continue
		}
		for _, d := range op.Deps {
			if d >= 0 && int(d) < i {
				list[next[d]] = int32(i)
				next[d]++
			}
		}
	}
	return users{off, list}
}

// nextUser is the first of users that touches bytes of out, or -1.
func nextUser(g *dag.Graph, users []int32, out dag.View) int32 {
	for _, u := range users {
		for _, a := range g.Ops[u].Access {
			if a.Buf == out.Buf && a.Overlaps(out) {
				return u
			}
		}
	}
	return -1
}

// denseOutput is the view a gemm writes when its matrices fill it, with
// no gaps between rows or between the batch's matrices and nothing
// after them: only then is an element-wise launch over the view the
// gemm's epilogue. Epilogues take f32, f16 and bf16.
func denseOutput(op *dag.Op) (dag.View, bool) {
	s := op.Gemm
	out := op.Access[s.OutAccess()].View
	dt := op.Access[dag.GemmA].Buf.DType
	if dt != dag.F32 && dt != dag.F16 && dt != dag.BF16 {
		return out, false
	}
	l := s.LayoutC()
	dense := l.LD == s.N && (s.Batch == 1 || l.Stride == s.M*s.N)
	return out, dense && out.Size == s.Batch*s.M*s.N*dt.Size()
}

// fusesInto says whether launch id can join fusion f, whose gemm writes
// out: the epilogue it makes, the bias it adds, or why it cannot.
func fusesInto(g *dag.Graph, f *fusion, id int32, out dag.View) (dag.Epilogue, dag.View, string) {
	op := g.Ops[id]
	gemm := g.Ops[f.parts[0]]
	if op.Kind != dag.Launch || op.Launch == nil || op.Launch.Kernel == nil || !buffersNamed(op) {
		return 0, dag.View{}, notACandidate
	}
	k := op.Launch.Kernel
	if k.Source != dag.Builtin || k.ElemDType() != out.Buf.DType { // the variant Build picks for the buffers
		return 0, dag.View{}, notACandidate
	}
	base := k.Base()
	if base != dag.BiasAdd && base != dag.Gelu && base != dag.Relu {
		return 0, dag.View{}, notACandidate
	}
	arg := func(i int) (dag.View, bool) {
		if i >= len(op.Launch.Args) {
			return dag.View{}, false
		}
		a := op.Launch.Args[i].Access
		if a < 0 || a >= len(op.Access) {
			return dag.View{}, false
		}
		return op.Access[a].View, true
	}
	y, ok1 := arg(0)
	x, ok2 := arg(1)
	switch {
	case !ok1 || !ok2:
		return 0, dag.View{}, notACandidate
	case y != out:
		return 0, dag.View{}, fmt.Sprintf("it writes %s, not %s's output %s", y, gemm.Name, out)
	case op.Device != gemm.Device:
		return 0, dag.View{}, fmt.Sprintf("it runs on device %d, %s on device %d", op.Device, gemm.Name, gemm.Device)
	case op.Priority != gemm.Priority:
		return 0, dag.View{}, fmt.Sprintf("its priority %s is not %s's %s", op.Priority, gemm.Name, gemm.Priority)
	}
	for _, d := range op.Deps {
		if d > f.parts[0] && !slices.Contains(f.parts, d) {
			return 0, dag.View{}, fmt.Sprintf("it follows %s, declared after %s", g.Ops[d].Name, gemm.Name)
		}
	}
	bias, act := f.epilogue.HasBias(), f.epilogue.Activation()
	var b dag.View
	switch base {
	case dag.BiasAdd:
		es := out.Buf.DType.Size()
		switch {
		case bias || act != dag.NoEpilogue:
			return 0, dag.View{}, fmt.Sprintf("%s already applies %s, and a bias goes first", gemm.Name, f.epilogue)
		case x.Size != gemm.Gemm.N*es:
			return 0, dag.View{}, fmt.Sprintf("its b holds %d elements, not one per column of %s (%d)", x.Size/es, gemm.Name, gemm.Gemm.N)
		case x.Overlaps(out):
			return 0, dag.View{}, fmt.Sprintf("its b overlaps %s's output", gemm.Name)
		}
		bias, b = true, x
	default:
		if x != out {
			return 0, dag.View{}, fmt.Sprintf("it reads %s, not %s's output %s", x, gemm.Name, out)
		}
		if act != dag.NoEpilogue {
			return 0, dag.View{}, fmt.Sprintf("%s already applies %s", gemm.Name, act)
		}
		act = dag.EpiGelu
		if base == dag.Relu {
			act = dag.EpiRelu
		}
	}
	e, _ := dag.ComposeEpilogue(bias, act)
	return e, b, ""
}

// fuseGraph returns g with each fusion's ops made one gemm with their
// epilogue, in the gemm's place, and the declared ops each op of it runs
// (State.Parts), from parts (nil: g's ops are the declared ones).
func fuseGraph(g *dag.Graph, groups []fusion, parts [][]int32) (*dag.Graph, [][]int32) {
	n := len(g.Ops)
	ids := make([]int32, 3*n)
	newID := ids[:n]
	head := ids[n : 2*n] // the op each op becomes part of: its fusion's gemm, or itself
	byHead := ids[2*n:]  // the fusion whose gemm each op is, or -1
	for i := range head {
		head[i], byHead[i] = int32(i), -1
	}
	for k := range groups {
		f := &groups[k]
		byHead[f.parts[0]] = int32(k)
		for _, p := range f.parts[1:] {
			head[p] = f.parts[0]
		}
	}
	next := int32(0)
	for i := range g.Ops {
		if head[i] == int32(i) {
			newID[i] = next
			next++
		}
	}
	out := &dag.Graph{Buffers: g.Buffers, Kernels: g.Kernels, Ops: make([]*dag.Op, 0, next)}
	outParts := make([][]int32, 0, next)
	// The new ops, their deps and their parts, each in one allocation.
	ops := make([]dag.Op, next)
	nDeps, nParts := 0, 0
	for i, op := range g.Ops {
		nDeps += len(op.Deps)
		if parts == nil {
			nParts++
		} else {
			nParts += len(parts[i])
		}
	}
	depArena, partArena := make([]int32, 0, nDeps), make([]int32, 0, nParts)
	specs := make([]dag.GemmSpec, len(groups))
	nAcc := 0
	for _, f := range groups {
		nAcc += len(g.Ops[f.parts[0]].Access) + 1
	}
	accArena := make([]dag.Access, 0, nAcc)
	for i, op := range g.Ops {
		id := int32(i)
		if head[i] != id {
			continue
		}
		members := []int32{id}
		c := &ops[newID[i]]
		*c = *op
		if k := byHead[id]; k >= 0 {
			members = groups[k].parts
			*c = fusedOp(g, &groups[k], &specs[k], &accArena)
		}
		d0, p0 := len(depArena), len(partArena)
		for _, m := range members {
			for _, d := range g.Ops[m].Deps {
				if h := head[d]; h != id {
					depArena = append(depArena, newID[h])
				}
			}
			if parts == nil {
				partArena = append(partArena, m)
			} else {
				partArena = append(partArena, parts[m]...)
			}
		}
		deps := depArena[d0:]
		slices.Sort(deps)
		deps = slices.Compact(deps)
		depArena = depArena[:d0+len(deps)]
		c.Deps = deps[:len(deps):len(deps)]
		if len(deps) == 0 {
			c.Deps = nil
		}
		c.ID, c.Index = int(newID[i]), int(newID[i])
		out.Ops = append(out.Ops, c)
		outParts = append(outParts, partArena[p0:len(partArena):len(partArena)])
	}
	return out, outParts
}

// fusedOp is fusion f's gemm with the launches' epilogue and bias, named
// after every part, its spec in spec and its accesses cut from room. A gemm with a cost hint costs its parts' hints
// together; one without is the cost model's to price, epilogue included.
func fusedOp(g *dag.Graph, f *fusion, spec *dag.GemmSpec, room *[]dag.Access) dag.Op {
	gemm := g.Ops[f.parts[0]]
	c := *gemm
	*spec = *gemm.Gemm
	spec.Epilogue = f.epilogue
	c.Gemm = spec
	a0 := len(*room)
	*room = append(*room, gemm.Access...)
	if f.bias.Buf != nil {
		*room = append(*room, dag.In(f.bias))
	}
	c.Access = (*room)[a0:len(*room):len(*room)]
	n := len(f.parts) - 1
	for _, p := range f.parts {
		n += len(g.Ops[p].Name)
	}
	var name strings.Builder
	name.Grow(n)
	for i, p := range f.parts {
		if i > 0 {
			name.WriteByte('+')
			if gemm.Cost > 0 {
				c.Cost += g.Ops[p].Cost
			}
		}
		name.WriteString(g.Ops[p].Name)
	}
	c.Name = name.String()
	return c
}
