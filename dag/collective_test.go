package dag_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestCollectiveKinds(t *testing.T) {
	for _, k := range []dag.OpKind{dag.AllReduce, dag.AllGather, dag.ReduceScatter, dag.Broadcast, dag.Send, dag.Recv} {
		info := k.Info()
		assert.Equal(t, dag.CollectiveClass, info.Class, "%s", k)
		assert.True(t, info.Ordered, "%s", k)
		assert.True(t, k.IsCollective(), "%s", k)
	}
	for _, k := range []dag.OpKind{dag.Alloc, dag.Free, dag.Copy, dag.Fill, dag.Launch, dag.Host} {
		assert.False(t, k.Info().Ordered, "%s", k)
		assert.False(t, k.IsCollective(), "%s", k)
	}
	assert.Equal(t, "collective", dag.CollectiveClass.String())
	for _, r := range dag.Reductions() {
		got, ok := dag.ParseReduction(r.String())
		assert.True(t, ok)
		assert.Equal(t, r, got)
	}
	// The values are NCCL's ncclRedOp_t.
	assert.Equal(t, []dag.Reduction{0, 1, 2, 3, 4}, []dag.Reduction{dag.Sum, dag.Prod, dag.Max, dag.Min, dag.Avg})
	_, ok := dag.ParseReduction("mean")
	assert.False(t, ok)
}

func TestCollectiveDeps(t *testing.T) {
	b := dag.New()
	g1 := b.Buffer("g1", 1024, dag.Of(dag.F32), dag.Zeros())
	g2 := b.Buffer("g2", 1024, dag.Of(dag.F32), dag.Zeros())
	all := b.Buffer("all", 4096, dag.Of(dag.F32), dag.Zeros())
	b.Fill(g1.All(), 1, dag.Name("f1"))
	b.AllReduce(g1.All(), dag.Sum, dag.Name("ar1"))
	b.Fill(g2.All(), 2, dag.Name("f2"))
	b.AllReduce(g2.All(), dag.Avg, dag.Name("ar2"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(32), g1.All(), 2.0, dag.Name("use1"))
	b.AllGather(g1.All(), all.All(), dag.Name("ag"))
	g, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, []string{"f1"}, deps(g, "ar1"))
	assert.ElementsMatch(t, []string{"f2", "ar1"}, deps(g, "ar2"), "collectives keep their declared order")
	assert.Equal(t, []string{"ar1"}, deps(g, "use1"), "an all-reduce writes its view")
	assert.ElementsMatch(t, []string{"use1", "ar2"}, deps(g, "ag"))
	var names []string
	for _, o := range g.Ordered() {
		names = append(names, o.Name)
	}
	assert.Equal(t, []string{"ar1", "ar2", "ag"}, names)
	assert.Equal(t, []string{
		"all_reduce ar1: 256 x f32, sum",
		"all_reduce ar2: 256 x f32, avg",
		"all_gather ag: 256 x f32 -> 1024 x f32",
	}, g.CollectiveSequence())
	require.NoError(t, g.CheckWorld(4))
	err = g.CheckWorld(2)
	require.Error(t, err)
	es := dag.Errors(err)
	require.Len(t, es, 1)
	assert.Equal(t, "ag", es[0].Op)
	assert.Contains(t, es[0].Error(), "in g1 times 2 ranks is 2048")
}

func TestCollectiveOrderSurvivesAfter(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Of(dag.I32), dag.Zeros())
	y := b.Buffer("y", 64, dag.Of(dag.I32), dag.Zeros())
	first := b.AllReduce(x.All(), dag.Max, dag.Name("first"))
	second := b.AllReduce(y.All(), dag.Min, dag.Name("second"))
	first.With(dag.After(second))
	_, err := b.Build()
	require.Error(t, err, "an after edge that reorders collectives is a cycle")
	assert.Contains(t, err.Error(), "dependency cycle")
}

func TestCollectiveErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *dag.Builder)
		world int // checked with CheckWorld when Build passes
		want  string
	}{
		{"host memory", func(b *dag.Builder) {
			b.AllReduce(b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros()).All(), dag.Sum, dag.Name("op"))
		}, 0, "h is pinned host memory"},
		{"partial element", func(b *dag.Builder) {
			b.AllReduce(b.Buffer("x", 64, dag.Of(dag.F64), dag.Zeros()).Slice(4, 8), dag.Sum, dag.Name("op"))
		}, 0, "not a whole number of f64 elements"},
		{"bad reduction", func(b *dag.Builder) {
			b.AllReduce(b.Buffer("x", 64, dag.Zeros()).All(), dag.Reduction(9), dag.Name("op"))
		}, 0, "unknown reduction 9"},
		{"dtypes differ", func(b *dag.Builder) {
			b.AllGather(b.Buffer("a", 64, dag.Of(dag.I32), dag.Zeros()).All(), b.Buffer("c", 128, dag.Of(dag.F32), dag.Zeros()).All(), dag.Name("op"))
		}, 0, "in a is i32, out c is f32"},
		{"overlap", func(b *dag.Builder) {
			x := b.Buffer("x", 128, dag.Zeros())
			b.AllGather(x.Slice(0, 64), x.All(), dag.Name("op"))
		}, 0, "overlap"},
		{"not a multiple", func(b *dag.Builder) {
			b.ReduceScatter(b.Buffer("a", 96, dag.Zeros()).All(), b.Buffer("c", 64, dag.Zeros()).All(), dag.Sum, dag.Name("op"))
		}, 0, "in must be world times out"},
		{"negative root", func(b *dag.Builder) {
			b.Broadcast(b.Buffer("x", 64, dag.Zeros()).All(), -1, dag.Name("op"))
		}, 0, "root rank -1 is negative"},
		{"negative peer", func(b *dag.Builder) {
			b.Recv(b.Buffer("x", 64, dag.Zeros()).All(), -2, dag.Name("op"))
		}, 0, "peer rank -2 is negative"},
		{"root outside world", func(b *dag.Builder) {
			b.Broadcast(b.Buffer("x", 64, dag.Zeros()).All(), 2, dag.Name("op"))
		}, 2, "root rank 2 is not in a world of 2"},
		{"peer outside world", func(b *dag.Builder) {
			b.Send(b.Buffer("x", 64, dag.Zeros()).All(), 5, dag.Name("op"))
		}, 4, "peer rank 5 is not in a world of 4"},
		{"scatter size", func(b *dag.Builder) {
			b.ReduceScatter(b.Buffer("a", 256, dag.Zeros()).All(), b.Buffer("c", 64, dag.Zeros()).All(), dag.Sum, dag.Name("op"))
		}, 2, "in a holds 256 bytes; out c times 2 ranks is 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.build(b)
			g, err := b.Build()
			if tt.world == 0 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				err = g.CheckWorld(tt.world)
				require.Error(t, err)
			}
			es := dag.Errors(err)
			require.NotEmpty(t, es)
			assert.Equal(t, "op", es[0].Op)
			assert.True(t, strings.Contains(err.Error(), tt.want), "%q lacks %q", err.Error(), tt.want)
		})
	}
	g, err := dag.New().Build()
	require.NoError(t, err)
	assert.Error(t, g.CheckWorld(0))
}

func ExampleBuilder_AllReduce() {
	b := dag.New()
	grads := b.Buffer("grads", 4096, dag.Of(dag.F32), dag.Zeros())
	shard := b.Buffer("shard", 1024, dag.Of(dag.F32), dag.Zeros())
	b.AllReduce(grads.All(), dag.Avg, dag.Name("sync"))
	b.ReduceScatter(grads.All(), shard.All(), dag.Sum, dag.Name("scatter"))
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	if err := g.CheckWorld(4); err != nil {
		panic(err)
	}
	for _, s := range g.CollectiveSequence() {
		fmt.Println(s)
	}
	// Output:
	// all_reduce sync: 1024 x f32, avg
	// reduce_scatter scatter: 1024 x f32 -> 256 x f32, sum
}
