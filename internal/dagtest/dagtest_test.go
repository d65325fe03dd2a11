package dagtest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// configs spans the options of Random; seed is added per run.
func configs() []Config {
	return []Config{
		{Ops: 1, Buffers: 1},
		{Ops: 40, Buffers: 3},
		{Ops: 120, Buffers: 6, Ranges: true},
		{Ops: 120, Buffers: 8, Ranges: true, Priorities: true, After: true},
		{Ops: 200, Buffers: 10, Ranges: true, Temporaries: true},
		{Ops: 200, Buffers: 10, HostBuffers: true, Devices: 2},
		{Ops: 300, Buffers: 12, Ranges: true, Priorities: true, Temporaries: true, HostBuffers: true, Devices: 3, After: true},
		{Ops: 300, Buffers: 2, Temporaries: true, HostBuffers: true, After: true},
	}
}

// run executes g's ops one after another in ID order (a valid order) and
// returns every persistent buffer's final bytes. Allocated memory starts as
// NaNs, so that reading a temporary before it is filled shows in the results.
func run(t *testing.T, g *dag.Graph) map[string][]byte {
	t.Helper()
	mem := make(map[*dag.Buffer][]byte)
	for _, b := range g.Buffers {
		if !b.Temporary {
			mem[b] = b.InitialBytes()
		}
	}
	bytesOf := func(o *dag.Op, v dag.View) []byte {
		m := mem[v.Buf]
		require.NotNil(t, m, "op %s uses %s while it is not allocated", o.Name, v.Buf.Name)
		return m[v.Offset:v.End()]
	}
	f32s := func(m []byte) int { return len(m) / 4 }
	for _, o := range g.Ops {
		switch o.Kind {
		case dag.Alloc:
			require.Nil(t, mem[o.Buffer()], "op %s allocates %s twice", o.Name, o.Buffer().Name)
			m := make([]byte, o.Buffer().Size)
			dag.FillElems(m, dag.F32, math.NaN())
			mem[o.Buffer()] = m
		case dag.Free:
			require.NotNil(t, mem[o.Buffer()], "op %s frees %s, which is not allocated", o.Name, o.Buffer().Name)
			delete(mem, o.Buffer())
		case dag.Fill:
			dag.FillElems(bytesOf(o, o.Access[0].View), dag.F32, o.FillValue)
		case dag.Copy:
			copy(bytesOf(o, o.Access[1].View), bytesOf(o, o.Access[0].View))
		case dag.Host:
			views := make([][]byte, len(o.Access))
			for i, a := range o.Access {
				views[i] = bytesOf(o, a.View)
			}
			require.NoError(t, o.HostFunc(context.Background(), views))
		case dag.Launch:
			arg := func(i int) []byte { return bytesOf(o, o.Access[o.Launch.Args[i].Access].View) }
			scalar := func(i int) float32 { return float32(o.Launch.Args[i].Float) }
			switch o.Launch.Kernel {
			case dag.Iota:
				x := arg(0)
				for i := range f32s(x) {
					putF32(x[4*i:], scalar(1)+float32(i))
				}
			case dag.Scale:
				x := arg(0)
				for i := range f32s(x) {
					putF32(x[4*i:], getF32(x[4*i:])*scalar(1))
				}
			case dag.Axpy:
				y, x := arg(0), arg(1)
				for i := range f32s(y) {
					putF32(y[4*i:], getF32(y[4*i:])+scalar(2)*getF32(x[4*i:]))
				}
			case dag.Add:
				c, a, b := arg(0), arg(1), arg(2)
				for i := range f32s(c) {
					putF32(c[4*i:], getF32(a[4*i:])+getF32(b[4*i:]))
				}
			case dag.ReduceSum:
				out, in := arg(0), arg(1)
				var sum float64
				for i := range f32s(in) {
					sum += float64(getF32(in[4*i:]))
				}
				putF32(out, float32(sum))
			default:
				t.Fatalf("op %s launches %s, which Random does not use", o.Name, o.Launch.Kernel.Name)
			}
		}
	}
	out := make(map[string][]byte)
	for b, m := range mem {
		require.False(t, b.Temporary, "temporary %s is never freed", b.Name)
		out[b.Name] = m
	}
	return out
}

func TestRandomIsValidAndBounded(t *testing.T) {
	kinds := map[string]int{}
	for _, cfg := range configs() {
		for seed := range 300 {
			cfg.Seed = int64(seed)
			g := Random(cfg) // panics if dag.Build rejects it
			require.GreaterOrEqual(t, len(g.Ops), cfg.Ops, "%+v", cfg)
			for _, o := range g.Ops {
				k := o.Kind.String()
				if o.Kind == dag.Launch {
					k = o.Launch.Kernel.Name
				}
				kinds[k]++
				assert.Less(t, len(o.Access), 4)
			}
			for name, m := range run(t, g) {
				for i := 0; i+4 <= len(m); i += 4 {
					v := getF32(m[i:])
					if math.IsNaN(float64(v)) || math.Abs(float64(v)) > maxBound {
						t.Fatalf("%+v: %s[%d] = %v: values must stay finite and below %d", cfg, name, i/4, v, maxBound)
					}
				}
			}
		}
	}
	for _, k := range []string{"alloc", "free", "copy", "fill", "host", "iota", "scale", "axpy", "add", "reduce_sum"} {
		assert.Positive(t, kinds[k], "no graph has a %s op", k)
	}
}

func TestRandomIsDeterministic(t *testing.T) {
	describe := func(g *dag.Graph) string {
		s := ""
		for _, o := range g.Ops {
			s += fmt.Sprintf("%s %v %d %v;", o.Name, o.Access, o.Priority, o.Deps)
		}
		return s
	}
	cfg := configs()[6]
	cfg.Seed = 42
	a, b := Random(cfg), Random(cfg)
	assert.Equal(t, describe(a), describe(b))
	assert.Equal(t, run(t, a), run(t, b))
	cfg.Seed = 43
	assert.NotEqual(t, describe(a), describe(Random(cfg)), "another seed gives another graph")
}

func TestRandomOptions(t *testing.T) {
	count := func(cfg Config, is func(g *dag.Graph, o *dag.Op) bool) int {
		n := 0
		for seed := range 20 {
			cfg.Seed = int64(seed)
			g := Random(cfg)
			for _, o := range g.Ops {
				if is(g, o) {
					n++
				}
			}
		}
		return n
	}
	partial := func(_ *dag.Graph, o *dag.Op) bool {
		for _, a := range o.Access {
			if a.Size != a.Buf.Size {
				return true
			}
		}
		return false
	}
	prioritised := func(_ *dag.Graph, o *dag.Op) bool { return o.Priority != dag.Normal }
	temporary := func(_ *dag.Graph, o *dag.Op) bool { return len(o.Access) > 0 && o.Access[0].Buf.Temporary }
	host := func(_ *dag.Graph, o *dag.Op) bool {
		for _, a := range o.Access {
			if a.Buf.Placement.Host() {
				return true
			}
		}
		return false
	}
	secondDevice := func(_ *dag.Graph, o *dag.Op) bool { return o.Device == 1 }
	base := Config{Ops: 100, Buffers: 8}
	tests := []struct {
		name string
		set  func(*Config)
		is   func(*dag.Graph, *dag.Op) bool
	}{
		{"ranges", func(c *Config) { c.Ranges = true }, partial},
		{"priorities", func(c *Config) { c.Priorities = true }, prioritised},
		{"temporaries", func(c *Config) { c.Temporaries = true }, temporary},
		{"host buffers", func(c *Config) { c.HostBuffers = true }, host},
		{"devices", func(c *Config) { c.Devices = 2 }, secondDevice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, count(base, tt.is), "off by default")
			cfg := base
			tt.set(&cfg)
			assert.Positive(t, count(cfg, tt.is), "on when asked for")
		})
	}
	t.Run("after", func(t *testing.T) {
		// An explicit edge shows as a dep between ops that share no buffer.
		unrelated := func(g *dag.Graph, o *dag.Op) bool {
			for _, d := range o.Deps {
				shared := false
				for _, a := range o.Access {
					for _, b := range g.Ops[d].Access {
						shared = shared || a.Buf == b.Buf
					}
				}
				if !shared {
					return true
				}
			}
			return false
		}
		assert.Zero(t, count(base, unrelated))
		cfg := base
		cfg.After = true
		assert.Positive(t, count(cfg, unrelated))
	})
}

func TestRandomSaneForOddConfigs(t *testing.T) {
	for _, cfg := range []Config{{}, {Ops: -1, Buffers: -3, Devices: -1}, {Ops: 50, Buffers: 1, Ranges: true, Temporaries: true, HostBuffers: true}} {
		g := Random(cfg)
		assert.GreaterOrEqual(t, len(g.Ops), max(cfg.Ops, 0))
	}
}

func TestShape(t *testing.T) {
	g := Shape(10000, 8, 1)
	require.Len(t, g.Ops, 10000)
	assert.Len(t, g.Buffers, 16)
	// Width-ish parallelism: the longest dependency chain is far shorter
	// than the graph, and far longer than 1.
	depth := make([]int, len(g.Ops))
	longest := 0
	for i, o := range g.Ops {
		for _, d := range o.Deps {
			depth[i] = max(depth[i], depth[d]+1)
		}
		longest = max(longest, depth[i]+1)
	}
	assert.Less(t, longest, len(g.Ops)/3)
	assert.Greater(t, longest, len(g.Ops)/100)
	assert.Len(t, Shape(0, 0, 1).Ops, 0)
}

func TestFixtures(t *testing.T) {
	names := map[string]bool{}
	for _, f := range Fixtures() {
		assert.False(t, names[f.Name], "fixture names are unique")
		names[f.Name] = true
		assert.NotEmpty(t, f.Graph.Ops, f.Name)
		run(t, f.Graph)
	}
}

// TestFamilyScaled: a family at another unit has Family's ops and
// buffers, its temporaries unit/1 KiB times as large.
func TestFamilyScaled(t *testing.T) {
	for _, fam := range Families() {
		g, big := Family(fam, 12, 3), FamilyScaled(fam, 12, 3, 64<<10)
		require.Len(t, big.Ops, len(g.Ops), fam)
		require.Len(t, big.Buffers, len(g.Buffers), fam)
		for i, b := range g.Buffers {
			if b.Temporary {
				assert.Equal(t, 64*b.Size, big.Buffers[i].Size, "%s: %s", fam, b.Name)
			}
		}
		for i, o := range g.Ops {
			assert.Equal(t, o.Name, big.Ops[i].Name, fam)
		}
		run(t, big)
	}
}

func BenchmarkShape(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Shape(n, 8, 1)
			}
		})
	}
}

func BenchmarkRandom(b *testing.B) {
	b.ReportAllocs()
	cfg := configs()[6]
	for b.Loop() {
		cfg.Seed++
		Random(cfg)
	}
}

// A seed gives the same graph every time; with Ranges, ops use parts of
// buffers, and only overlapping parts depend on each other.
func ExampleRandom() {
	g := Random(Config{Ops: 6, Buffers: 3, Seed: 1, Ranges: true})
	for _, o := range g.Ops {
		fmt.Print(o.Name)
		for _, a := range o.Access {
			fmt.Printf(" %s %s", a.Mode, a.View)
		}
		for _, d := range o.Deps {
			fmt.Printf(", after %s", g.Ops[d].Name)
		}
		fmt.Println()
	}
	// Output:
	// scale0 inout b1[4:292]
	// scale1 inout b0[220:444]
	// scale2 inout b0, after scale1
	// scale3 inout b2[44:132]
	// iota4 out b2, after scale3
	// scale5 inout b0[20:500], after scale2
}

// Memset2D adds 2-D memsets, whose regions fit their views.
func TestRandomMemset2D(t *testing.T) {
	n := 0
	for seed := range int64(20) {
		g := Random(Config{Ops: 40, Buffers: 4, Seed: seed, Ranges: seed%2 == 0, HostBuffers: true, Memset2D: true})
		for _, op := range g.Ops {
			if op.Memset2D != nil {
				n++
				b, ok := op.Memset2D.Bound(4)
				assert.True(t, ok)
				assert.Equal(t, op.Access[0].Size, b)
			}
		}
	}
	assert.Positive(t, n)
}
