package rewrite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
)

// minSplitRows is the fewest rows a piece of a split GEMM keeps: below
// it a tensor-core GEMM runs too few tiles to fill the device, and the
// pieces would cost more than the transfer they hide.
const minSplitRows = 256

// maxPieces bounds the pieces of a split: a quarter of the transfer left
// exposed, against a launch and a wait for each further piece.
const maxPieces = 4

// split is one GEMM and the transfer at its end, each cut into pieces
// row blocks.
type split struct {
	gemm, copy int32
	pieces     int64
}

// Split returns g with the first GEMM and the upload that writes its A,
// and the last GEMM and the download that reads its output, each cut into
// row blocks where cost says the transfer hidden is worth the further
// launches; the declared ops each op of it runs, from parts (nil: g's ops
// are the declared ones); and one line for people on what it cut or why
// not. Where nothing is cut, g and parts come back as they are. own says
// that g's ops are the caller's to change: the ops left whole are then
// g's own, renumbered, rather than copies of them.
//
// Those are a pipeline's two ends, where nothing can hide a transfer:
// before the first computation, its input's upload runs alone; after the
// last, its output's download does. Cut into row blocks, the first GEMM
// starts on the first block of its input while the rest arrives, and the
// download of the last GEMM's first block runs while the GEMM computes
// the next. Ops in between stay whole: the planner already overlaps their
// transfers with the computation beside them.
//
// An all_reduce is the other place where nothing hides: it reduces rows
// only after the GEMMs have computed all of them. Its chain (chainOf) is
// cut into row blocks where the graph asks (dag.SplitInto) or cost and
// cfg say the reduction hidden is worth the launches and SMs it takes:
// the reduction of one block then runs beside the GEMMs of the next.
func Split(g *dag.Graph, parts [][]int32, cost perf.CostModel, cfg ChainConfig, own bool) (*dag.Graph, [][]int32, string) {
	if !slices.ContainsFunc(g.Ops, func(op *dag.Op) bool { return op != nil && op.Kind == dag.Gemm }) {
		return g, parts, "nothing split" // the common case of graphs without GEMMs costs one scan
	}
	var splits []split
	var why []string
	launch := perf.OverheadsOf(cost).Submit
	first, last := endComputations(g)
	if first >= 0 {
		if sp, reason := headSplit(g, first, cost, launch); reason == "" {
			splits = append(splits, sp)
		} else {
			why = append(why, reason)
		}
	}
	if last >= 0 {
		sp, reason := tailSplit(g, last, cost, launch)
		switch {
		case reason != "":
			why = append(why, reason)
		case len(splits) > 0 && splits[0].gemm == sp.gemm:
			// One GEMM between the two transfers: its pieces serve both.
			sp.pieces = min(sp.pieces, splits[0].pieces)
			splits[0].pieces = sp.pieces
			splits = append(splits, sp)
		default:
			splits = append(splits, sp)
		}
	}
	taken := map[int32]int64{}
	for _, sp := range splits {
		taken[sp.gemm], taken[sp.copy] = sp.pieces, sp.pieces
	}
	chains, chainWhy := findChains(g, taken, cost, launch, cfg)
	if len(splits) == 0 && len(chains) == 0 {
		why = append(chainWhy, why...) // a split asked for and not made first
		if len(why) == 0 {
			return g, parts, "nothing split"
		}
		return g, parts, "nothing split: " + why[0]
	}
	out, outParts, newIDs := splitGraph(g, splits, chains, parts, own)
	var b []byte
	for _, sp := range splits {
		if len(b) > 0 {
			b = append(b, "; "...)
		}
		x, y := min(sp.copy, sp.gemm), max(sp.copy, sp.gemm)
		b = strconv.AppendInt(append(append(append(append(b, g.Ops[x].Name...), " and "...), g.Ops[y].Name...), " in "...), sp.pieces, 10)
		b = append(b, " row blocks"...)
	}
	for _, ch := range chains {
		if len(b) > 0 {
			b = append(b, "; "...)
		}
		names := make([]string, len(ch.ops))
		for k, id := range ch.ops {
			names[k] = g.Ops[id].Name
		}
		b = fmt.Appendf(b, "%s in %d row blocks, each block's %s beside the next block's GEMMs", strings.Join(names, ", "), ch.pieces, g.Ops[ch.coll].Name)
		leaveSMs(out, ch, newIDs, cfg)
	}
	for _, w := range chainWhy {
		b = fmt.Appendf(b, "; %s", w)
	}
	return out, outParts, string(b)
}

// computes reports whether op keeps a device's SMs busy: what a transfer
// at a pipeline's end has nothing to overlap with.
func computes(op *dag.Op) bool {
	switch op.Kind {
	case dag.Gemm, dag.Launch, dag.Task:
		return true
	}
	return op.Kind.IsCollective()
}

// endComputations returns the first and the last op of g that computes,
// in g's order (a topological one), or -1.
func endComputations(g *dag.Graph) (first, last int32) {
	first, last = -1, -1
	for i, op := range g.Ops {
		if op != nil && computes(op) {
			if first < 0 {
				first = int32(i)
			}
			last = int32(i)
		}
	}
	return first, last
}

// rowGemm reports whether op is a GEMM whose operands A, C and D each
// hold its rows one after another with nothing between them, so that a
// block of rows of the product is a GEMM on a slice of each.
func rowGemm(op *dag.Op) bool {
	s := op.Gemm
	if op.Kind != dag.Gemm || s == nil || s.TransA || s.Batch > 1 || s.M <= 0 || len(op.Access) <= s.OutAccess() {
		return false
	}
	dense := func(i int, cols, ld int64) bool {
		if ld == 0 {
			ld = cols
		}
		v := op.Access[i].View
		return ld == cols && v.Buf != nil && v.Size == perf.SatMul(perf.SatMul(s.M, cols), v.Buf.DType.Size())
	}
	if !dense(dag.GemmA, s.K, s.LDA) || !dense(dag.GemmC, s.N, s.LDC) {
		return false
	}
	return !s.SeparateD || dense(dag.GemmD, s.N, s.LDC)
}

// plainCopy reports whether op copies one view to another of its size.
func plainCopy(op *dag.Op) bool {
	return op.Kind == dag.Copy && len(op.Access) == 2 && op.Access[0].Size == op.Access[1].Size
}

// headSplit is the split of the first computation, gemm, with the upload
// that writes its A, or why there is none.
func headSplit(g *dag.Graph, gemm int32, cost perf.CostModel, launch time.Duration) (split, string) {
	op := g.Ops[gemm]
	if !rowGemm(op) {
		return split{}, fmt.Sprintf("the first computation, %s, is not a GEMM over whole rows", op.Name)
	}
	a := op.Access[dag.GemmA].View
	for _, d := range op.Deps {
		c := g.Ops[d]
		if plainCopy(c) && c.Access[1].View == a {
			n, why := pieces(op, c, cost, launch)
			return split{gemm: gemm, copy: d, pieces: n}, why
		}
	}
	return split{}, fmt.Sprintf("no upload writes all of %s's A just before it", op.Name)
}

// tailSplit is the split of the last computation, gemm, with the
// download that reads its output, or why there is none.
func tailSplit(g *dag.Graph, gemm int32, cost perf.CostModel, launch time.Duration) (split, string) {
	op := g.Ops[gemm]
	if !rowGemm(op) {
		return split{}, fmt.Sprintf("the last computation, %s, is not a GEMM over whole rows", op.Name)
	}
	out := op.Access[op.Gemm.OutAccess()].View
	for i := int(gemm) + 1; i < len(g.Ops); i++ {
		c := g.Ops[i]
		if c != nil && plainCopy(c) && c.Access[0].View == out && slices.Contains(c.Deps, gemm) {
			n, why := pieces(op, c, cost, launch)
			return split{gemm: gemm, copy: int32(i), pieces: n}, why
		}
	}
	return split{}, fmt.Sprintf("no download reads all of %s's output just after it", op.Name)
}

// pieces is how many row blocks gemm and its transfer c are cut into:
// as many as keep minSplitRows rows a piece, divide the rows evenly, and
// hide more of the transfer than the further launches cost; or why none.
func pieces(gemm, c *dag.Op, cost perf.CostModel, launch time.Duration) (int64, string) {
	m := gemm.Gemm.M
	xfer := cost.Duration(c)
	for n := int64(maxPieces); n >= 2; n /= 2 {
		if m%n != 0 || m/n < minSplitRows {
			continue
		}
		hidden := xfer * time.Duration(n-1) / time.Duration(n)
		if hidden <= 4*time.Duration(n-1)*launch {
			return 0, fmt.Sprintf("%s would hide %v, less than its further launches cost", c.Name, hidden)
		}
		return n, ""
	}
	return 0, fmt.Sprintf("%s has %d rows, too few to cut into blocks of %d", gemm.Name, m, minSplitRows)
}

// splitGraph returns g with each split's GEMM and transfer, and each
// chain's ops, replaced by their pieces, in their places; the declared op
// each op runs (State.Parts, from parts: nil when g's ops are the declared
// ones); and the ops each op of g became. A piece of a split or chain op
// depends on the pieces of its partners (the other op of its split, the
// ops of its chain it has data from) whose rows it shares, and only on
// those: that is the overlap. Every other dependency, on a split op or of
// one, is on every piece, as it was on the whole, so each split op still
// runs, to everything but its partners, as one op where its last piece
// runs (which is how the verifier checks it against the graph as
// declared). The pieces of an op follow one another: so that its last
// piece runs after the others, and after the last piece of each partner
// it has data from (the op as declared runs there), and so that every
// rank issues the pieces of a collective in one order.
func splitGraph(g *dag.Graph, splits []split, chains []chain, parts [][]int32, own bool) (*dag.Graph, [][]int32, [][]int32) {
	cut := make([]int64, len(g.Ops)) // the pieces of each op cut, 0 for the others
	partners := map[[2]int32]bool{}
	for _, sp := range splits {
		cut[sp.gemm], cut[sp.copy] = sp.pieces, sp.pieces
		partners[[2]int32{sp.gemm, sp.copy}], partners[[2]int32{sp.copy, sp.gemm}] = true, true
	}
	for _, ch := range chains {
		for _, id := range ch.ops {
			cut[id] = ch.pieces
			for _, d := range g.Ops[id].Deps {
				if slices.Contains(ch.ops, d) && conflict(g.Ops[id], g.Ops[d]) {
					partners[[2]int32{id, d}] = true
				}
			}
		}
	}
	// The ops each op of g became, their deps and the declared ops they
	// run, each cut from one allocation.
	total, deps := 0, 0
	for i, op := range g.Ops {
		k, became := int(max(cut[i], 1)), 1 // a piece follows the one before it
		for _, d := range op.Deps {
			became += int(max(cut[d], 1))
		}
		total += k
		deps += k * became
	}
	newIDs := make([][]int32, len(g.Ops))
	ids := make([]int32, 0, total)
	for i := range g.Ops {
		k := int(max(cut[i], 1))
		newIDs[i] = ids[len(ids) : len(ids) : len(ids)+k]
		ids = ids[:len(ids)+k]
	}
	depArena := make([]int32, 0, deps)
	var mineArena []int32
	if parts == nil {
		mineArena = make([]int32, len(g.Ops))
	}
	out := &dag.Graph{Buffers: g.Buffers, Kernels: g.Kernels, Ops: make([]*dag.Op, 0, total)}
	outParts := make([][]int32, 0, total)
	var room pieceRoom // for the pieces
	room.roomFor(g, cut)
	var names pieceNames
	var copies []dag.Op // the ops not cut, in one allocation, unless g's own are
	if !own {
		copies = make([]dag.Op, len(g.Ops))
	}
	for i, op := range g.Ops {
		id := int32(i)
		var mine []int32
		if parts != nil {
			mine = parts[i]
		} else {
			mineArena[i] = id
			mine = mineArena[i : i+1 : i+1]
		}
		var ps []dag.Op
		whole := op
		if n := cut[id]; n > 1 {
			ps = cutRows(op, n, &room)
		} else if !own {
			copies[i] = *op
			whole = &copies[i]
		}
		for k := range max(len(ps), 1) {
			c := whole
			if ps != nil {
				c = &ps[k]
			}
			c.ID, c.Index = len(out.Ops), len(out.Ops)
			d0 := len(depArena)
			depArena = pieceDeps(depArena, out, id, op.Deps, c, newIDs, partners, cut[id] > 0)
			if len(ps) > 1 && k > 0 {
				depArena = append(depArena, newIDs[i][k-1])
			}
			c.Deps = depArena[d0:len(depArena):len(depArena)]
			if len(c.Deps) == 0 {
				c.Deps = nil
			}
			if len(ps) > 1 {
				c.Name = names.name(op.Name, k+1, len(ps))
			}
			newIDs[i] = append(newIDs[i], int32(c.ID))
			out.Ops = append(out.Ops, c)
			outParts = append(outParts, mine)
		}
	}
	return out, outParts, newIDs
}

// pieceDeps appends to deps the dependencies of c, op id of g (whose
// dependencies are opDeps) or a piece of it, among the ops of out, sorted:
// each of op's dependencies d, as the ops d became; only those whose
// accesses meet c's where d is op's partner in a split (cut says op is
// cut, and may have partners).
func pieceDeps(deps []int32, out *dag.Graph, id int32, opDeps []int32, c *dag.Op, newIDs [][]int32, partners map[[2]int32]bool, cut bool) []int32 {
	d0 := len(deps)
	for _, d := range opDeps {
		became := newIDs[d]
		if !cut || !partners[[2]int32{id, d}] {
			deps = append(deps, became...)
			continue
		}
		for _, b := range became {
			if conflict(out.Ops[b], c) {
				deps = append(deps, b)
			}
		}
	}
	mine := deps[d0:]
	slices.Sort(mine)
	return deps[:d0+len(slices.Compact(mine))]
}

// conflict reports whether x and y use a byte in common that one of them
// writes.
func conflict(x, y *dag.Op) bool {
	for _, a := range x.Access {
		for _, b := range y.Access {
			if a.Buf == b.Buf && (a.Mode.Writes() || b.Mode.Writes()) && a.Overlaps(b.View) {
				return true
			}
		}
	}
	return false
}

// pieceNames names pieces "up0#2/4", cut from a few kilobytes of text at
// a time: a strings.Builder never changes what it has written, so each
// name stays valid as the text grows.
type pieceNames struct{ text strings.Builder }

func (p *pieceNames) name(op string, k, n int) string {
	var buf [48]byte
	b := strconv.AppendInt(append(strconv.AppendInt(append(append(buf[:0], op...), '#'), int64(k), 10), '/'), int64(n), 10)
	if p.text.Cap()-p.text.Len() < len(b) {
		p.text = strings.Builder{}
		p.text.Grow(max(1024, len(b)))
	}
	p.text.Write(b)
	all := p.text.String()
	return all[len(all)-len(b):]
}

// pieceRoom is room for the pieces of ops that are cut, in an allocation
// each for their ops, accesses and GEMM specs; the zero pieceRoom makes
// the room of each op apart.
type pieceRoom struct {
	ops   []dag.Op
	acc   []dag.Access
	specs []dag.GemmSpec
}

// roomFor makes r the room of the ops of g cut into cut[i] pieces.
func (r *pieceRoom) roomFor(g *dag.Graph, cut []int64) {
	ops, acc, specs := 0, 0, 0
	for i, op := range g.Ops {
		if n := int(cut[i]); n > 1 {
			ops, acc = ops+n, acc+n*len(op.Access)
			if op.Kind == dag.Gemm {
				specs += n
			}
		}
	}
	*r = pieceRoom{make([]dag.Op, 0, ops), make([]dag.Access, 0, acc), make([]dag.GemmSpec, 0, specs)}
}

// take is the room of op's n pieces, made where r has none left.
func (r *pieceRoom) take(op *dag.Op, n int64) ([]dag.Op, []dag.Access, []dag.GemmSpec) {
	k, m := int(n), int(n)*len(op.Access)
	if r == nil {
		r = &pieceRoom{}
	}
	r.ops, r.acc = slices.Grow(r.ops, k), slices.Grow(r.acc, m)
	ops, acc := r.ops[len(r.ops):len(r.ops)+k], r.acc[len(r.acc):len(r.acc)+m]
	r.ops, r.acc = r.ops[:len(r.ops)+k], r.acc[:len(r.acc)+m]
	var specs []dag.GemmSpec
	if op.Kind == dag.Gemm {
		r.specs = slices.Grow(r.specs, k)
		specs, r.specs = r.specs[len(r.specs):len(r.specs)+k], r.specs[:len(r.specs)+k]
	}
	return ops, acc, specs
}

// cutRows cuts op into n ops on consecutive blocks of its rows: a GEMM
// over whole rows (rowGemm) its A, C and D; a plain copy, an elementwise
// launch or an all_reduce every view.
func cutRows(op *dag.Op, n int64, room *pieceRoom) []dag.Op {
	out, acc, specs := room.take(op, n)
	for k := range n {
		c := &out[k]
		*c = *op
		m := len(op.Access)
		c.Access = acc[int(k)*m : int(k+1)*m : int(k+1)*m]
		copy(c.Access, op.Access)
		slice := func(i int) {
			v := c.Access[i].View
			step := v.Size / n
			c.Access[i].View = dag.View{Buf: v.Buf, Offset: v.Offset + k*step, Size: step}
		}
		if op.Kind == dag.Gemm {
			spec := &specs[k]
			*spec = *op.Gemm
			spec.M /= n
			c.Gemm = spec
			slice(dag.GemmA)
			slice(dag.GemmC)
			if spec.SeparateD {
				slice(dag.GemmD)
			}
		} else {
			for i := range c.Access {
				slice(i)
			}
		}
		c.Cost = op.Cost / time.Duration(n) // a hint, split as the work is; zero stays the cost model's
	}
	return out
}
