package dagtest

import "github.com/dagrun/dagrun/dag"

// TPPart is the part of the tensor-parallel MLP block TPMLP declares.
type TPPart string

// The parts: the block whole, and the two bounds of its time.
const (
	TPBlock   TPPart = "block"   // the whole block
	TPCompute TPPart = "compute" // the GEMMs and gelu alone
	TPComm    TPPart = "comm"    // the all-reduce of y alone
)

// TPShape is what TPMLP declares: the part, the row blocks its all-reduce
// asks the planner for (0: none asked, as the planner chooses), and
// whether the all-reduce runs at high priority.
type TPShape struct {
	Part   TPPart
	Chunks int
	High   bool
}

// TPMLP is rank r's tensor-parallel MLP block of a world of world ranks,
// bf16, T x H tokens and F = 4 H / world (examples/ranks/tp_mlp.yaml's
// block): h = gelu((1/8) x W1_r), y = (1/8) h W2_r, y = all_reduce(y) +
// x. cuda's BenchmarkTPMLP times it, and job's tests check that dagrun
// run plans the spec as it is planned there.
func TPMLP(r, world int, t, h int64, sh TPShape) (*dag.Graph, error) {
	f := 4 * h / int64(world)
	g := dag.New()
	bf, dev := dag.Of(dag.BF16), dag.OnDevice(r)
	x := g.Buffer("x", 2*t*h, dev, bf, dag.Random(11))
	w1 := g.Buffer("w1", 2*h*f, dev, bf, dag.Random(uint64(12+100*r)))
	w2 := g.Buffer("w2", 2*f*h, dev, bf, dag.Random(uint64(13+100*r)))
	hid := g.Buffer("h", 2*t*f, dev, bf, dag.Zeros())
	y := g.Buffer("y", 2*t*h, dev, bf, dag.Zeros())
	if sh.Part != TPComm {
		g.Gemm(hid.All(), x.All(), w1.All(), dag.GemmShape{M: t, N: f, K: h}, dag.Alpha(0.125), dev, dag.Name("fc1"))
		g.Launch(dag.Gelu, dag.Grid1(1024), dag.Threads(256), hid, hid, dev, dag.Name("act"))
		g.Gemm(y.All(), hid.All(), w2.All(), dag.GemmShape{M: t, N: h, K: f}, dag.Alpha(0.125), dev, dag.Name("fc2"))
	}
	if sh.Part != TPCompute {
		prio := dag.Normal
		if sh.High {
			prio = dag.High
		}
		opts := []dag.OpOption{dev, prio, dag.Name("reduce")}
		if sh.Chunks > 0 {
			opts = append(opts, dag.SplitInto(sh.Chunks))
		}
		g.AllReduce(y.All(), dag.Sum, opts...)
	}
	if sh.Part == TPBlock {
		g.Launch(dag.Axpy, dag.Grid1(1024), dag.Threads(256), y, x, float32(1), dev, dag.Name("residual"))
	}
	return g.Build()
}
