package dagtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/dagrun/dagrun/dag"
)

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

// Control is a random graph with loops and branches (RandomControl), and
// what running it must leave: Want holds every buffer's final f32
// elements by name, worked out in Go as the graph is made, and Trips how
// many iterations each loop runs in all, by name.
type Control struct {
	Graph *dag.Graph
	Want  map[string][]float32
	Trips map[string]int
}

// RandomControl makes a graph of device ops on f32 data buffers with
// loops and branches nested up to depth deep. Each loop's trip count is
// random but fixed: before the loop a fill sets its counter to the count
// and set_flag its flag from it, and the body ends by taking one from the
// counter (axpy with a buffer of ones) and setting the flag again, so the
// loop runs exactly that many times (none for a count of 0). A branch's
// flag comes from a data element against a threshold, so the data chooses.
// The data ops (scale by 0.5 or -1, the mean with another buffer, fills
// of a slice with small integers) keep every value within 4 in magnitude,
// each rounded once as the builtins round, so any correct schedule on any
// backend leaves Want bit for bit. Flags are in Want as 0 or 1 (i32 in
// memory). The same seed gives the same graph.
func RandomControl(seed int64, ops, depth int) Control {
	c := &controlGen{r: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), b: dag.New(), want: map[string][]float32{}, trips: map[string]int{}}
	c.one = c.data("one", 1, 1)
	for i := range 3 {
		c.bufs = append(c.bufs, c.data(fmt.Sprintf("x%d", i), 64, float32(i+1)))
	}
	c.list(c.b, ops, depth)
	g, err := c.b.Build()
	if err != nil {
		panic(fmt.Sprintf("dagtest: RandomControl(%d, %d, %d) made a graph dag.Build rejects: %v", seed, ops, depth, err))
	}
	var run state = c.want
	for _, s := range c.steps {
		s(run)
	}
	return Control{Graph: g, Want: c.want, Trips: c.trips}
}

// state is the reference's memory: every buffer's f32 elements by name
// (flags too, as 0 or 1).
type state map[string][]float32

type controlGen struct {
	r     *rand.Rand
	b     *dag.Builder
	one   *dag.Buffer
	bufs  []*dag.Buffer
	want  state // initial contents, then (after RandomControl) the final ones
	trips map[string]int
	steps []func(state) // the reference, in the order the ops run
	n     int           // control ops made, for names
	ops   int           // data ops named
}

// data declares an f32 buffer of n elements, each v.
func (c *controlGen) data(name string, n int64, v float32) *dag.Buffer {
	m := make([]byte, 4*n)
	dag.FillElems(m, dag.F32, float64(v))
	init := make([]float32, n)
	for i := range init {
		init[i] = v
	}
	c.want[name] = init
	return c.b.Buffer(name, 4*n, dag.Of(dag.F32), dag.Contents(m))
}

// flag declares a control op's flag and the counter or value it is set
// from.
func (c *controlGen) flag(name string) *dag.Buffer {
	c.want[name] = []float32{0}
	return c.b.Buffer(name, 4, dag.Of(dag.I32))
}

// list declares about n ops into b, loops and branches among them while
// depth allows.
func (c *controlGen) list(b *dag.Builder, n, depth int) {
	for range max(n, 1) {
		switch k := c.r.IntN(10); {
		case depth > 0 && k == 0:
			c.loop(b, n/2, depth-1)
		case depth > 0 && k == 1:
			c.branch(b, n/2, depth-1)
		default:
			c.dataOp(b)
		}
	}
}

// dataOp declares one op on the data buffers, and its reference.
func (c *controlGen) dataOp(b *dag.Builder) {
	x := c.bufs[c.r.IntN(len(c.bufs))]
	name := x.Name
	switch c.r.IntN(3) {
	case 0:
		alpha := []float32{0.5, -1}[c.r.IntN(2)]
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x, float64(alpha), dag.Name(c.name("scale")))
		c.steps = append(c.steps, func(s state) {
			for i := range s[name] {
				s[name][i] *= alpha
			}
		})
	case 1:
		y := c.bufs[c.r.IntN(len(c.bufs))]
		if y == x {
			y = c.bufs[(c.r.IntN(len(c.bufs)-1)+1+indexOf(c.bufs, x))%len(c.bufs)]
		}
		// The mean of two buffers: no value grows past the largest fill,
		// however many times loops repeat it.
		from := y.Name
		b.Launch(dag.Axpy, dag.Grid1(2), dag.Threads(16), x, dag.In(y.All()), 1.0, dag.Name(c.name("sum")))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 0.5, dag.Name(c.name("half")))
		c.steps = append(c.steps, func(s state) {
			for i := range s[name] {
				s[name][i] += s[from][i]
				s[name][i] *= 0.5
			}
		})
	default:
		lo := c.r.IntN(32)
		v := float32(c.r.IntN(9) - 4)
		b.Fill(x.Slice(int64(4*lo), 4*16), float64(v), dag.Name(c.name("fill")))
		c.steps = append(c.steps, func(s state) {
			for i := lo; i < lo+16; i++ {
				s[name][i] = v
			}
		})
	}
}

// name is a name no other op has. The ops are named here because dag
// names the unnamed ops of an if's then and else alike (each body
// numbers its own from 0, after the if).
func (c *controlGen) name(base string) string {
	c.ops++
	return fmt.Sprintf("%s_%d", base, c.ops)
}

func indexOf(bufs []*dag.Buffer, x *dag.Buffer) int {
	for i, b := range bufs {
		if b == x {
			return i
		}
	}
	return 0
}

// loop declares a loop of a random trip count (0 to 4) around a random
// body: counter = trips; flag = counter > 0.5; while flag { body;
// counter -= 1; flag = counter > 0.5 }.
func (c *controlGen) loop(b *dag.Builder, n, depth int) {
	c.n++
	name := fmt.Sprintf("loop%d", c.n)
	trips := c.r.IntN(5)
	counter := c.data(name+"_count", 1, 0)
	flag := c.flag(name + "_flag")
	b.Fill(counter.All(), float64(trips), dag.Name(name+"_count"))
	b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name(name+"_enter"))
	// The reference runs the body's steps trips times: they are gathered
	// apart from the steps around the loop.
	outer := c.steps
	c.steps = nil
	b.While(flag.All(), func(body *dag.Builder) {
		c.list(body, n, depth)
		body.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), counter, dag.In(c.one.All()), -1.0, dag.Name(name+"_count_down"))
		body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name(name+"_again"))
	}, dag.AtMost(8), dag.Name(name))
	inner := c.steps
	c.steps = append(outer, func(s state) {
		s[counter.Name][0] = float32(trips)
		for s[counter.Name][0] > 0.5 {
			c.trips[name]++
			for _, st := range inner {
				st(s)
			}
			s[counter.Name][0]--
		}
		s[flag.Name][0] = 0
	})
}

// branch declares an if whose flag is a data element against a threshold
// (set_flag), with a random then and, half the time, a random else.
func (c *controlGen) branch(b *dag.Builder, n, depth int) {
	c.n++
	name := fmt.Sprintf("branch%d", c.n)
	flag := c.flag(name + "_flag")
	x := c.bufs[c.r.IntN(len(c.bufs))]
	at := int64(c.r.IntN(64))
	threshold := float64(c.r.IntN(9)) - 4.5
	b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(x.Slice(4*at, 4)), threshold, dag.Name(name+"_test"))
	outer := c.steps
	c.steps = nil
	var then, els []func(state)
	var otherwise func(*dag.Builder)
	if c.r.IntN(2) == 0 {
		otherwise = func(body *dag.Builder) {
			c.steps = nil
			c.list(body, n, depth)
			els = c.steps
		}
	}
	b.If(flag.All(), func(body *dag.Builder) {
		c.list(body, n, depth)
		then = c.steps
	}, otherwise, dag.Name(name))
	src := x.Name
	c.steps = append(outer, func(s state) {
		taken := then
		s[flag.Name][0] = 0
		if float64(s[src][at]) > threshold {
			s[flag.Name][0] = 1
		} else {
			taken = els
		}
		for _, st := range taken {
			st(s)
		}
	})
}
