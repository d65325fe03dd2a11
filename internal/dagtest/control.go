package dagtest

import "github.com/dagrun/dagrun/dag"

// Counter keeps a loop's flag set for a given number of iterations with
// fills and copies alone, which every backend runs in a body: a shift
// register of n ones and a zero moves down one element per iteration,
// and the flag copies its first element. Tests of loops use it where no
// kernel sets a flag.
type Counter struct {
	Flag     *dag.Buffer // i32, one element
	reg, tmp *dag.Buffer
	n        int64
}

// NewCounter declares in b the buffers of a counter of n >= 1 iterations,
// named after name; Arm sets it going.
func NewCounter(b *dag.Builder, name string, n int) *Counter {
	n = max(n, 1)
	return &Counter{
		Flag: b.Buffer(name, 4, dag.Of(dag.I32)),
		reg:  b.Buffer(name+"_reg", 4*int64(n+1), dag.Of(dag.I32)),
		tmp:  b.Buffer(name+"_tmp", 4*int64(n), dag.Of(dag.I32)),
		n:    int64(n),
	}
}

// Arm declares in b (the graph, or the body of an outer loop, to count
// afresh in each of its iterations) the fills that start the count: the
// flag set, the register n ones and a zero.
func (c *Counter) Arm(b *dag.Builder) {
	b.Fill(c.reg.Slice(0, 4*c.n), 1)
	b.Fill(c.reg.Slice(4*c.n, 4), 0)
	b.Fill(c.Flag.All(), 1)
}

// Step declares in a loop's body the copies that count one iteration:
// after the k-th, the flag is set while k < n.
func (c *Counter) Step(body *dag.Builder) {
	body.Copy(c.tmp.All(), c.reg.Slice(4, 4*c.n))
	body.Copy(c.reg.Slice(0, 4*c.n), c.tmp.All())
	body.Copy(c.Flag.All(), c.reg.Slice(0, 4))
}
