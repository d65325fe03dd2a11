package dagtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/dagrun/dagrun/dag"
)

// Families names the shapes Family makes, for memory planning: chains,
// fork-joins, layered graphs and pipelines of temporaries.
func Families() []string { return []string{"chain", "forkjoin", "layered", "pipeline"} }

// Family returns a graph of the named shape (one of Families) whose
// intermediate results are temporary device buffers of random sizes (1 to
// 16 KiB, in whole f32 elements) on device 0, n of them or about that many:
// each is filled, then added into from the temporaries it depends on, then
// read by the ops that depend on it; the last ones are added into a
// persistent output. Allocs and frees are left to dag.Build. It panics on a
// name it does not know.
func Family(name string, n int, seed int64) *dag.Graph { return FamilyScaled(name, n, seed, 1024) }

// FamilyScaled is Family with temporaries of 1 to 16 units of unit bytes (a
// multiple of 4), and kernels of one block of 32 threads per KiB of unit,
// so that large temporaries take no longer to add. With the same name, n
// and seed it makes the same ops and buffers for any unit, Family's at
// 1024; only the dependencies through the 16 KiB output may differ, as
// larger temporaries are added into more of it.
func FamilyScaled(name string, n int, seed int64, unit int64) *dag.Graph {
	r := rand.New(rand.NewPCG(uint64(seed), 0x66616d696c79))
	b := dag.New()
	n = max(n, 2)
	count := 0
	temp := func() *dag.Buffer {
		t := b.Buffer(fmt.Sprintf("t%d", count), unit*int64(1+r.IntN(16)), dag.Temporary())
		count++
		return t
	}
	one := dag.Grid1(int(max(unit/1024, 1)))
	// derive fills t and adds its inputs into it, over the bytes all share.
	derive := func(t *dag.Buffer, in ...*dag.Buffer) {
		b.Fill(t.All(), 1)
		for _, x := range in {
			m := min(t.Size, x.Size)
			b.Launch(dag.Add, one, dag.Threads(32), t.Slice(0, m), t.Slice(0, m), x.Slice(0, m))
		}
	}
	out := b.Buffer("out", 16*1024, dag.Zeros())
	sink := func(ts ...*dag.Buffer) {
		for _, t := range ts {
			m := min(t.Size, out.Size)
			b.Launch(dag.Add, one, dag.Threads(32), out.Slice(0, m), out.Slice(0, m), t.Slice(0, m))
		}
	}
	switch name {
	case "chain":
		prev := temp()
		derive(prev)
		for range n - 1 {
			t := temp()
			derive(t, prev)
			prev = t
		}
		sink(prev)
	case "forkjoin":
		// Forks of 2 to 5 branches, each a short chain, joined into one
		// temporary that starts the next fork.
		src := temp()
		derive(src)
		for count < n {
			var ends []*dag.Buffer
			for range 2 + r.IntN(4) {
				prev := src
				for range 1 + r.IntN(3) {
					t := temp()
					derive(t, prev)
					prev = t
				}
				ends = append(ends, prev)
			}
			src = temp()
			derive(src, ends...)
		}
		sink(src)
	case "layered":
		width := 2 + r.IntN(5)
		layer := make([]*dag.Buffer, width)
		for i := range layer {
			layer[i] = temp()
			derive(layer[i])
		}
		for count < n {
			next := make([]*dag.Buffer, width)
			for i := range next {
				next[i] = temp()
				derive(next[i], layer[r.IntN(width)], layer[r.IntN(width)])
			}
			layer = next
		}
		sink(layer...)
	case "pipeline":
		// Microbatches through stages: stage s of batch i needs stage s-1
		// of batch i and the stage's weights.
		stages := 2 + r.IntN(4)
		weights := make([]*dag.Buffer, stages)
		for s := range weights {
			weights[s] = b.Buffer(fmt.Sprintf("w%d", s), 16*1024, dag.Value(0.5))
		}
		for count < n {
			prev := temp()
			derive(prev, weights[0])
			for s := 1; s < stages; s++ {
				t := temp()
				derive(t, prev, weights[s])
				prev = t
			}
			sink(prev)
		}
	default:
		panic(fmt.Sprintf("dagtest: no family %q", name))
	}
	g, err := b.Build()
	if err != nil {
		panic(fmt.Sprintf("dagtest: FamilyScaled(%q, %d, %d, %d) made a graph dag.Build rejects: %v", name, n, seed, unit, err))
	}
	return g
}
