package dagtest

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Fixture is a small hand-made graph with a name that says its shape.
type Fixture struct {
	Name  string
	Graph *dag.Graph
}

// Fixtures returns fresh copies of small graphs with shapes planners get
// wrong: a chain, a diamond, a fan-out/fan-in, a double-buffered
// host-device pipeline, disjoint ranges of one buffer, a temporary freed
// in the middle, and high-priority work beside low-priority work.
func Fixtures() []Fixture {
	return []Fixture{
		{"chain", build("chain", chain)},
		{"diamond", build("diamond", diamond)},
		{"fanout8", build("fanout8", fanOut)},
		{"pipeline", build("pipeline", pipeline)},
		{"ranges", build("ranges", ranges)},
		{"temporary", build("temporary", temporary)},
		{"priorities", build("priorities", priorities)},
	}
}

func build(name string, declare func(b *dag.Builder)) *dag.Graph {
	b := dag.New()
	declare(b)
	g, err := b.Build()
	if err != nil {
		panic(fmt.Sprintf("dagtest: fixture %s does not build: %v", name, err))
	}
	return g
}

func chain(b *dag.Builder) {
	x := b.Buffer("x", 256)
	b.Launch(dag.Iota, dag.Grid1(1), dag.Threads(32), x, 0.0, dag.Name("iota"))
	for i := range 4 {
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x, 1.5, dag.Name(fmt.Sprintf("scale%d", i)))
	}
}

func diamond(b *dag.Builder) {
	x, y, z, w := b.Buffer("x", 256), b.Buffer("y", 256, dag.Zeros()), b.Buffer("z", 256, dag.Value(1)), b.Buffer("w", 256)
	b.Launch(dag.Iota, dag.Grid1(1), dag.Threads(32), x, 1.0, dag.Name("top"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), y, x, 0.5, dag.Name("left"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), z, x, 0.25, dag.Name("right"))
	b.Launch(dag.Add, dag.Grid1(1), dag.Threads(32), w, y, z, dag.Name("bottom"))
}

func fanOut(b *dag.Builder) {
	in := b.Buffer("in", 256, dag.Random(1))
	sum := b.Buffer("sum", 4)
	parts := make([]*dag.Buffer, 8)
	for i := range parts {
		parts[i] = b.Buffer(fmt.Sprintf("part%d", i), 256, dag.Value(float64(i)))
		b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), parts[i], in, 0.5, dag.Name(fmt.Sprintf("branch%d", i)))
	}
	for n := len(parts); n > 1; n /= 2 {
		for i := range n / 2 {
			b.Launch(dag.Add, dag.Grid1(1), dag.Threads(32), parts[i], parts[i], parts[i+n/2], dag.Name(fmt.Sprintf("join%d.%d", n, i)))
		}
	}
	b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(32), sum, parts[0].Slice(0, 64), dag.Name("reduce"))
}

// pipeline streams 4 chunks of a pinned input through two device buffers
// (double buffering) and back to a pinned output.
func pipeline(b *dag.Builder) {
	const chunk = 256
	in := b.Buffer("in", 4*chunk, dag.PinnedHost(), dag.Random(2))
	out := b.Buffer("out", 4*chunk, dag.PinnedHost())
	dev := []*dag.Buffer{b.Buffer("d0", chunk), b.Buffer("d1", chunk)}
	for i := range 4 {
		d := dev[i%2]
		b.Copy(d.All(), in.Slice(int64(i)*chunk, chunk), dag.Name(fmt.Sprintf("h2d%d", i)))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), d, 2.0, dag.Name(fmt.Sprintf("scale%d", i)))
		b.Copy(out.Slice(int64(i)*chunk, chunk), d.All(), dag.Name(fmt.Sprintf("d2h%d", i)))
	}
}

func ranges(b *dag.Builder) {
	x := b.Buffer("x", 512, dag.Zeros())
	b.Launch(dag.Iota, dag.Grid1(1), dag.Threads(32), x.Slice(0, 256), 0.0, dag.Name("lo"))
	b.Launch(dag.Iota, dag.Grid1(1), dag.Threads(32), x.Slice(256, 256), 64.0, dag.Name("hi"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x.Slice(128, 256), 0.5, dag.Name("middle"))
}

func temporary(b *dag.Builder) {
	t := b.Buffer("t", 256, dag.Temporary())
	out := b.Buffer("out", 256, dag.Value(1))
	b.Alloc(t, dag.Name("alloc"))
	b.Fill(t.All(), 3, dag.Name("init"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(32), out, t, 1.0, dag.Name("use"))
	b.Free(t, dag.Name("free"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), out, 2.0, dag.Name("after"))
}

func priorities(b *dag.Builder) {
	urgent := b.Buffer("urgent", 64, dag.Value(1))
	bulk := b.Buffer("bulk", 4096, dag.Random(3))
	for i := range 4 {
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), bulk, 0.5, dag.Name(fmt.Sprintf("bulk%d", i)), dag.Low)
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), urgent, 1.5, dag.Name(fmt.Sprintf("urgent%d", i)), dag.High)
	}
}
