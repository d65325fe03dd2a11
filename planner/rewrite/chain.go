package rewrite

import (
	"fmt"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
)

// A chain is an all_reduce, the GEMMs before it that compute its rows,
// and the elementwise launches between and after them: a tensor-parallel
// block's second half, y = all_reduce(gelu(x W1) W2) + x. Cut into row
// blocks, the reduction of one block runs beside the GEMMs of the next,
// instead of after all of them.
type chain struct {
	ops    []int32 // in graph order, the all_reduce among them
	gemm   int32   // the GEMM that writes the reduced rows
	coll   int32
	pieces int64
}

// minChainRows is the fewest rows a block of a chain the cost model
// chooses keeps (one the graph asks for with SplitInto may keep fewer).
const minChainRows = minSplitRows

// maxChainPieces is the most blocks the cost model weighs for a chain:
// 2, 4 and so on up to it.
const maxChainPieces = 8

// ChainConfig is what the split of a chain needs to know of the device.
type ChainConfig struct {
	// SMs is the device's multiprocessor count.
	SMs int
	// CollectiveSMs is how many SMs a collective's kernels hold while
	// they run: the GEMMs that run beside one leave them free
	// (dag.GemmSpec.LeaveSMs). With 0 the GEMMs keep every SM, and the
	// cost model holds that the collective then slows them by about
	// what it hides, as measured with NCCL on an H200: it cuts a chain
	// only where the graph asks.
	CollectiveSMs int
}

// findChains returns the chains of g's all_reduces that split, none of
// whose ops is in taken (cut already), and why the others do not.
func findChains(g *dag.Graph, taken map[int32]int64, cost perf.CostModel, launch time.Duration, cfg ChainConfig) ([]chain, []string) {
	var chains []chain
	var why []string
	used := map[int32]bool{}
	for i, op := range g.Ops {
		if op == nil || op.Kind != dag.AllReduce || op.Collective == nil || op.Collective.Split == 1 || !buffersNamed(op) {
			continue
		}
		ch, reason := chainOf(g, int32(i))
		if reason == "" && slices.ContainsFunc(ch.ops, func(id int32) bool { return taken[id] > 0 || used[id] }) {
			reason = "its GEMMs are cut at a pipeline's end already"
		}
		if reason == "" {
			ch.pieces, reason = chainBlocks(g, ch, cost, launch, cfg)
		}
		if reason != "" {
			if op.Collective.Split > 1 {
				why = append(why, fmt.Sprintf("%s not split in %d: %s", op.Name, op.Collective.Split, reason))
			}
			continue
		}
		for _, id := range ch.ops {
			used[id] = true
		}
		chains = append(chains, ch)
	}
	return chains, why
}

// chainOf is the chain of the all_reduce coll, or why it has none: the
// GEMM that writes all of its view just before it, the GEMMs of as many
// rows before that GEMM whose outputs are the next one's A (each with the
// elementwise launches on that output between them), and the elementwise
// launches on the reduced view after it.
func chainOf(g *dag.Graph, coll int32) (chain, string) {
	c := g.Ops[coll]
	v := c.Access[0].View
	w := writerOf(g, c, v)
	if w < 0 || !rowGemm(g.Ops[w]) || outputView(g.Ops[w]) != v {
		return chain{}, fmt.Sprintf("%s's view is not the output of a GEMM over whole rows just before it", c.Name)
	}
	ch := chain{gemm: w, coll: coll}
	rows := g.Ops[w].Gemm.M
	ops := []int32{coll}
	for cur := w; ; {
		ops = append(ops, cur)
		a := g.Ops[cur].Access[dag.GemmA].View
		p := writerOf(g, g.Ops[cur], a)
		for p >= 0 && elementwise(g.Ops[p], a) {
			ops = append(ops, p)
			p = writerOf(g, g.Ops[p], a)
		}
		if p < 0 || !rowGemm(g.Ops[p]) || outputView(g.Ops[p]) != a || g.Ops[p].Gemm.M != rows {
			break
		}
		cur = p
	}
	// The launches after the reduction on its rows: a residual, a scale.
	for cur := coll; ; {
		next := int32(-1)
		for i := cur + 1; int(i) < len(g.Ops); i++ {
			if op := g.Ops[i]; op != nil && slices.Contains(op.Deps, cur) && touches(op, v) {
				next = i
				break
			}
		}
		if next < 0 || !elementwise(g.Ops[next], v) {
			break
		}
		ops = append(ops, next)
		cur = next
	}
	slices.Sort(ops)
	ch.ops = ops
	return ch, ""
}

// writerOf is the dependency of op that last writes all of v (the op's
// data comes from it), or -1.
func writerOf(g *dag.Graph, op *dag.Op, v dag.View) int32 {
	for k := len(op.Deps) - 1; k >= 0; k-- {
		d := g.Ops[op.Deps[k]]
		if d == nil {
			continue
		}
		for _, a := range d.Access {
			if a.Mode.Writes() && a.View == v {
				return op.Deps[k]
			}
		}
	}
	return -1
}

// outputView is the view a GEMM writes.
func outputView(op *dag.Op) dag.View { return op.Access[op.Gemm.OutAccess()].View }

// touches reports whether op uses a byte of v.
func touches(op *dag.Op, v dag.View) bool {
	return slices.ContainsFunc(op.Access, func(a dag.Access) bool { return a.Buf == v.Buf && a.Overlaps(v) })
}

// elementwise reports whether op is a builtin launch that computes each
// element from the same element of its other views (scale, axpy, add,
// gelu, relu), writes v, and has every view of v's size: a block of
// its rows is the same launch on a slice of each view.
func elementwise(op *dag.Op, v dag.View) bool {
	if op.Kind != dag.Launch || op.Launch == nil || op.Launch.Kernel == nil || !buffersNamed(op) {
		return false
	}
	switch op.Launch.Kernel.Base() {
	case dag.Scale, dag.Axpy, dag.Add, dag.Gelu, dag.Relu:
	default:
		return false
	}
	writes := false
	for _, a := range op.Access {
		if a.Size != v.Size {
			return false
		}
		writes = writes || (a.Mode.Writes() && a.View == v)
	}
	return writes
}

// chainBlocks is how many row blocks ch is cut into, or why none: the
// count the graph asks for, where it divides the rows; else the count
// whose hidden reduction most outweighs its further launches and the
// GEMM time it costs, if any does.
//
// Cut in n, only the last block's reduction stays exposed, if each of the
// others fits beside a block of the GEMM; each further reduction pays the
// collective's latency again (in the cost of a block), and the GEMM's
// blocks beside a reduction run on the SMs it leaves them.
func chainBlocks(g *dag.Graph, ch chain, cost perf.CostModel, launch time.Duration, cfg ChainConfig) (int64, string) {
	coll, gemm := g.Ops[ch.coll], g.Ops[ch.gemm]
	rows := gemm.Gemm.M
	if n := int64(coll.Collective.Split); n > 1 {
		if rows%n != 0 {
			return 0, fmt.Sprintf("%d rows do not divide into %d blocks", rows, n)
		}
		return n, ""
	}
	if cfg.CollectiveSMs <= 0 || cfg.CollectiveSMs >= cfg.SMs {
		return 0, "beside GEMMs on every SM a collective slows them by about what it hides"
	}
	whole := cost.Duration(coll)
	best, gain := int64(0), time.Duration(0)
	for n := int64(2); n <= maxChainPieces; n *= 2 {
		if rows%n != 0 || rows/n < minChainRows {
			continue
		}
		commBlock, gemmBlock := cost.Duration(&cutRows(coll, n, nil)[0]), cost.Duration(&cutRows(gemm, n, nil)[0])
		beside := time.Duration(n-1) * gemmBlock
		hidden := min(whole-commBlock, beside)
		slower := time.Duration(float64(beside) * float64(cfg.CollectiveSMs) / float64(cfg.SMs-cfg.CollectiveSMs))
		net := hidden - slower - time.Duration(int64(len(ch.ops))*(n-1))*launch
		if net > gain {
			best, gain = n, net
		}
	}
	if best == 0 {
		return 0, "the reduction it would hide costs less than the launches and SMs it takes"
	}
	return best, ""
}

// leaveSMs has the blocks of ch's GEMM after the first, which run beside
// the reductions of the blocks before them, leave the collective's SMs.
func leaveSMs(out *dag.Graph, ch chain, newIDs [][]int32, cfg ChainConfig) {
	if cfg.CollectiveSMs <= 0 || cfg.CollectiveSMs >= cfg.SMs {
		return
	}
	for _, id := range newIDs[ch.gemm][1:] {
		out.Ops[id].Gemm.LeaveSMs = cfg.CollectiveSMs
	}
}
