package dag_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
)

// buildErr builds and returns the errors, failing when Build accepts.
func buildErr(t *testing.T, b *dag.Builder) dag.ErrorList {
	t.Helper()
	_, err := b.Build()
	require.Error(t, err)
	var list dag.ErrorList
	require.True(t, errors.As(err, &list), "Build returns an ErrorList, got %T", err)
	assert.Equal(t, len(list), len(dag.Errors(err)), "Errors lists what the list holds")
	return list
}

func TestOneRoundWithCycles(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	b.Buffer("neg", -1, dag.Zeros())
	p := b.Fill(x.All(), 1, dag.Name("p"))
	q := b.Launch(dag.Scale, dag.Grid1(0), dag.Threads(1), x, 2.0, dag.Name("q"))
	b.Fill(x.Slice(0, 128), 0, dag.Name("r"))
	p.With(dag.After(q)) // q reads x after p wrote it: a cycle
	list := buildErr(t, b)
	var msgs []string
	for _, e := range list {
		msgs = append(msgs, e.Error())
	}
	require.Len(t, list, 4, "%q", msgs)
	assert.Equal(t, "neg", list[0].Buffer, "in declaration order")
	assert.Contains(t, msgs[1], "dependency cycle: p -> q -> p")
	assert.Equal(t, "q", list[2].Op)
	assert.Contains(t, list[2].Msg, "below 1")
	assert.Equal(t, "r", list[3].Op)
	assert.Contains(t, list[3].Msg, "out of range")
	assert.Contains(t, list.Error(), "below 1", "Error lists every problem")
	assert.Contains(t, list.Error(), "dependency cycle")
	assert.NoError(t, dag.ErrorList(nil).Err())
	assert.Equal(t, list, list.Err())
	assert.True(t, sort.IsSorted(list))
}

func TestEveryCycleReported(t *testing.T) {
	b := dag.New()
	var ops []*dag.Op
	for i := range 4 {
		ops = append(ops, b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name(fmt.Sprint("e", i))))
	}
	ops[0].With(dag.After(ops[1]))
	ops[1].With(dag.After(ops[0]))
	ops[2].With(dag.After(ops[3]))
	ops[3].With(dag.After(ops[2]))
	list := buildErr(t, b)
	assert.Len(t, list, 2)
	for _, e := range list {
		assert.Equal(t, "after", e.Field)
		assert.Contains(t, e.Msg, "dependency cycle")
	}
}

func TestArgTypeError(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, "two", dag.Name("l"))
	list := buildErr(t, b)
	require.Len(t, list, 1)
	assert.Equal(t, "l", list[0].Op)
	assert.Equal(t, "args.alpha", list[0].Field)
	var ate *dag.ArgTypeError
	require.ErrorAs(t, list.Err(), &ate)
	assert.Equal(t, 1, ate.Index)
	assert.Equal(t, "string", ate.Type)
}

func TestOverflowSafe(t *testing.T) {
	const huge = math.MaxInt64
	tests := []struct {
		name  string
		build func(b *dag.Builder)
		field string
		msg   string
	}{
		{"view end wraps", func(b *dag.Builder) {
			x := b.Buffer("x", 1<<40, dag.Zeros())
			b.Fill(x.Slice(huge-8, 64), 0, dag.Name("o"))
		}, "", "out of range"},
		{"view size wraps", func(b *dag.Builder) {
			x := b.Buffer("x", huge, dag.Zeros())
			b.Fill(x.Slice(8, huge), 0, dag.Name("o"))
		}, "", "out of range"},
		{"grid x block", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Dim(1<<31-1, 65535, 65535), dag.Threads(1024), dag.Name("o"))
		}, "grid", "2^63 threads"},
		{"block product", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(1), dag.Dim(1<<40, 1<<40, 1<<40), dag.Name("o"))
		}, "block", "too large"},
		{"negative cost", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("o"), dag.Cost(-time.Second))
		}, "cost", "out of range"},
		{"absurd cost", func(b *dag.Builder) {
			b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(1), dag.Name("o"), dag.Cost(1500000*time.Hour))
		}, "cost", "out of range"},
		{"matmul sizes beyond i32", func(b *dag.Builder) {
			c, x, y := b.Buffer("c", 64, dag.Zeros()), b.Buffer("a", 64, dag.Zeros()), b.Buffer("bb", 64, dag.Zeros())
			b.Launch(dag.Matmul, dag.Grid1(1), dag.Threads(1), c, x, y, int64(1)<<40, int64(1)<<40, 1, dag.Name("o"))
		}, "args.m", "does not fit in i32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.build(b)
			list := buildErr(t, b)
			assert.Equal(t, "o", list[0].Op)
			assert.Equal(t, tt.field, list[0].Field)
			assert.Contains(t, list[0].Msg, tt.msg)
		})
	}
	t.Run("bytes saturate", func(t *testing.T) {
		x := &dag.Buffer{Name: "x", Size: huge}
		o := &dag.Op{Kind: dag.Launch, Access: []dag.Access{dag.In(x.All()), dag.In(x.All())}}
		assert.Equal(t, int64(huge), o.Bytes())
	})
}

func TestFillValues(t *testing.T) {
	tests := []struct {
		dt  dag.DType
		v   float64
		bad bool
	}{
		{dag.U8, 255, false}, {dag.U8, 256, true}, {dag.U8, -1, true}, {dag.U8, 255.5, false},
		{dag.I32, math.MaxInt32, false}, {dag.I32, 1e20, true}, {dag.I32, math.NaN(), true},
		{dag.I32, math.Inf(1), true}, {dag.I32, math.MinInt32, false}, {dag.I32, -1e10, true},
		{dag.I64, 1e18, false}, {dag.I64, 1 << 63, true}, {dag.I64, -(1 << 63), false}, {dag.I64, math.NaN(), true},
		{dag.F32, 1e38, false}, {dag.F32, 1e39, true}, {dag.F32, math.NaN(), false}, {dag.F32, math.Inf(-1), false},
		{dag.F64, math.MaxFloat64, false}, {dag.F64, math.NaN(), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %g", tt.dt, tt.v), func(t *testing.T) {
			b := dag.New()
			x := b.Buffer("x", 64, dag.Of(tt.dt), dag.Zeros())
			b.Fill(x.All(), tt.v, dag.Name("f"))
			_, err := b.Build()
			if !tt.bad {
				assert.NoError(t, err)
				return
			}
			list := buildErr(t, b)
			assert.Equal(t, "value", list[0].Field)
			assert.Equal(t, "f", list[0].Op)

			b = dag.New()
			b.Buffer("x", 64, dag.Of(tt.dt), dag.Value(tt.v))
			list = buildErr(t, b)
			assert.Equal(t, "init", list[0].Field, "initial values are checked the same way")
		})
	}
}

func TestLaunchOverlaps(t *testing.T) {
	user := &dag.Kernel{Name: "user", Source: dag.CUDAC, Code: "...",
		Params: []dag.Param{{Name: "c", Kind: dag.BufferParam}, {Name: "a", Kind: dag.BufferParam}}}
	tests := []struct {
		name  string
		build func(b *dag.Builder, x *dag.Buffer)
		msg   string // "" when accepted
	}{
		{"partial overlap, one written", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(user, dag.Grid1(1), dag.Threads(1), dag.Out(x.Slice(0, 4096)), dag.In(x.Slice(2048, 4096)))
		}, "partly overlap"},
		{"partial overlap, both read", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(user, dag.Grid1(1), dag.Threads(1), dag.In(x.Slice(0, 4096)), dag.In(x.Slice(2048, 4096)))
		}, ""},
		{"disjoint", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(user, dag.Grid1(1), dag.Threads(1), dag.Out(x.Slice(0, 2048)), dag.In(x.Slice(2048, 4096)))
		}, ""},
		{"identical, user kernel in place", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(user, dag.Grid1(1), dag.Threads(1), dag.InOut(x.Slice(0, 4096)), dag.In(x.Slice(0, 4096)))
		}, ""},
		{"identical, add in place", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(dag.Add, dag.Grid1(1), dag.Threads(1), x.Slice(0, 4096), x.Slice(0, 4096), x.Slice(4096, 4096))
		}, ""},
		{"add partial", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(dag.Add, dag.Grid1(1), dag.Threads(1), x.Slice(0, 4096), x.Slice(4, 4096), x.Slice(4096, 4096))
		}, "partly overlap"},
		{"identical, reduce_sum does not work in place", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(1), x.Slice(0, 64), x.Slice(0, 64))
		}, "does not work in place"},
		{"identical, matmul does not work in place", func(b *dag.Builder, x *dag.Buffer) {
			b.Launch(dag.Matmul, dag.Grid1(1), dag.Threads(1), x.Slice(0, 64), x.Slice(0, 64), x.Slice(64, 64), 4, 4, 4)
		}, "does not work in place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			b.Kernel(user)
			tt.build(b, b.Buffer("x", 8192, dag.Zeros()))
			_, err := b.Build()
			if tt.msg == "" {
				assert.NoError(t, err)
				return
			}
			list := buildErr(t, b)
			assert.Contains(t, list[0].Msg, tt.msg)
			assert.Contains(t, list[0].Field, "args.")
		})
	}
}

func TestEdgeCap(t *testing.T) {
	// n disjoint writers, then n readers of all of it: n*n edges.
	declare := func(n int) *dag.Builder {
		b := dag.New()
		x := b.Buffer("x", int64(4*n), dag.Zeros())
		for i := range n {
			b.Fill(x.Slice(int64(4*i), 4), 1)
		}
		for i := range n {
			b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(1), b.Buffer(fmt.Sprint("out", i), 4, dag.Zeros()), x, dag.Name(fmt.Sprint("read", i)))
		}
		return b
	}
	_, err := declare(1000).Build() // 1M edges
	require.NoError(t, err)
	list := buildErr(t, declare(3200)) // 10.24M edges
	require.Len(t, list, 1)
	assert.Equal(t, "read3125", list[0].Op, "the reader that crosses the cap") // 3126*3200 > 10^7
	assert.Contains(t, list[0].Hint, "explicit after")
}

func TestDescendingRangesMatchAscending(t *testing.T) {
	const n = 2000
	build := func(desc bool) *dag.Graph {
		b := dag.New()
		x := b.Buffer("x", 4*n, dag.Zeros())
		for i := range n {
			j := i
			if desc {
				j = n - 1 - i
			}
			b.Fill(x.Slice(int64(4*j), 4), 1, dag.Name(fmt.Sprint("f", j)))
		}
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x.Slice(4*n/4, 4*n/2), 2.0, dag.Name("mid"))
		g, err := b.Build()
		require.NoError(t, err)
		return g
	}
	for _, desc := range []bool{false, true} {
		g := build(desc)
		assert.Len(t, deps(g, "mid"), n/2)
		assert.Empty(t, dag.BruteForceDeps(g, nil))
	}
}

func TestInferenceMatchesBruteForce(t *testing.T) {
	for _, cfg := range []dagtest.Config{
		{Ops: 200, Buffers: 3, Ranges: true},
		{Ops: 300, Buffers: 6, Ranges: true, Temporaries: true, HostBuffers: true},
		{Ops: 300, Buffers: 1, Ranges: true},
	} {
		for seed := range 30 {
			cfg.Seed = int64(seed)
			g := dagtest.Random(cfg)
			require.Empty(t, dag.BruteForceDeps(g, nil), "%+v", cfg)
		}
	}
}

func TestLiveAtEnd(t *testing.T) {
	b := dag.New()
	used := b.Buffer("used", 64, dag.Temporary())
	never := b.Buffer("never", 64, dag.Temporary())
	freed := b.Buffer("freed", 64, dag.Temporary())
	b.Alloc(used)
	b.Fill(used.All(), 1)
	b.Alloc(never)
	b.Alloc(freed)
	b.Free(freed)
	g, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []*dag.Buffer{never}, g.LiveAtEnd())
}

func TestPageableCopy(t *testing.T) {
	b := dag.New()
	dev, pin, page := b.Buffer("dev", 64, dag.Zeros()), b.Buffer("pin", 64, dag.PinnedHost(), dag.Zeros()), b.Buffer("page", 64, dag.PageableHost(), dag.Zeros())
	up := b.Copy(dev.All(), page.All())
	down := b.Copy(page.All(), dev.All())
	pinned := b.Copy(dev.All(), pin.All())
	host := b.Copy(pin.All(), page.All())
	fill := b.Fill(page.All(), 0)
	assert.True(t, up.SyncCopy())
	assert.True(t, down.SyncCopy())
	assert.False(t, pinned.SyncCopy())
	assert.False(t, host.SyncCopy(), "host to host is a memcpy")
	assert.False(t, fill.SyncCopy())
	assert.True(t, dag.PageableCopy(page, dev))
	assert.False(t, dag.PageableCopy(nil, dev))
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 1 << 20: "1.0 MiB", math.MaxInt64: "8.0 EiB"} {
		assert.Equal(t, want, dag.FormatBytes(n))
	}
}

func TestBuildAgainAfterErrors(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("a"))
	bad := b.Fill(x.All(), 1e300, dag.Name("b"))
	_, err := b.Build()
	require.Error(t, err)
	bad.FillValue = 2
	g, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, deps(g, "b"))
	_ = context.Background
}

func TestNilsAreErrors(t *testing.T) {
	b := dag.New()
	b.Alloc(nil, dag.Name("a"))
	b.Fill(dag.View{}, 0, dag.Name("f"))
	b.Launch(nil, dag.Grid1(1), dag.Threads(1), (*dag.Buffer)(nil), dag.Name("l"))
	b.Host(nil, dag.Name("h"))
	list := buildErr(t, b)
	var ops []string
	for _, e := range list {
		ops = append(ops, e.Op)
	}
	assert.Equal(t, []string{"a", "f", "l", "h"}, ops)
}

func TestCountAndEndNeverWrap(t *testing.T) {
	assert.Equal(t, math.MaxInt, dag.Dim(1<<40, 1<<40, 1<<40).Count())
	assert.Equal(t, 0, dag.Dim(-1, 2, 2).Count())
	assert.Equal(t, 6, dag.Dim(1, 2, 3).Count())
	assert.Equal(t, int64(math.MaxInt64), dag.View{Offset: math.MaxInt64 - 1, Size: 10}.End())
}

func TestNarrowThenWideReads(t *testing.T) {
	// n narrow reads, then wide reads of all of the buffer, then a write:
	// reads never cut the writers' ranges, so the wide reads cost O(log n)
	// each, and the write depends on every read.
	const n = 400
	b := dag.New()
	x := b.Buffer("x", 4*n, dag.Zeros())
	out := b.Buffer("out", 4*n, dag.Zeros())
	for i := range n {
		b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), out.Slice(int64(4*i), 4), x.Slice(int64(4*i), 4), 1.0)
	}
	for i := range n {
		b.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), out, x, 1.0, dag.Name(fmt.Sprint("wide", i)))
	}
	b.Fill(x.Slice(4, 4), 0, dag.Name("w"))
	g, err := b.Build()
	require.NoError(t, err)
	assert.Len(t, deps(g, "w"), n+1)
	assert.Empty(t, dag.BruteForceDeps(g, nil))
}

func TestInferenceWorkCap(t *testing.T) {
	// Two ops write the even and the odd elements of x, one view each; then
	// every wide read visits all n ranges for two edges: capped.
	const n = 4000
	noop := func(context.Context, [][]byte) error { return nil }
	b := dag.New()
	x := b.Buffer("x", 4*n, dag.PinnedHost(), dag.Zeros())
	var even, odd []dag.OpOption
	for i := range n {
		if v := x.Slice(int64(4*i), 4); i%2 == 0 {
			even = append(even, dag.Out(v))
		} else {
			odd = append(odd, dag.Out(v))
		}
	}
	b.Host(noop, even...)
	b.Host(noop, odd...)
	for i := range n * 2 {
		b.Host(noop, dag.In(x.All()), dag.Name(fmt.Sprint("wide", i)))
	}
	list := buildErr(t, b)
	require.Len(t, list, 1)
	assert.Contains(t, list[0].Msg, "byte ranges")
	assert.Contains(t, list[0].Op, "wide")
}
