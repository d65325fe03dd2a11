package cpu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
)

const loopElems = 1024

// halving: x (all ones) is halved n times by a loop, its body spread over
// four quarters of x that nothing orders, so they may run on four
// streams; y then gets a copy of x.
func halving(n, max int) func(b *dag.Builder) {
	return func(b *dag.Builder) {
		x := b.Buffer("x", 4*loopElems, dag.Value(1))
		y := b.Buffer("y", 4*loopElems, dag.Zeros())
		c := dagtest.NewCounter(b, "flag", n)
		c.Arm(b)
		b.While(c.Flag.All(), func(body *dag.Builder) {
			for q := range int64(4) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(256), x.Slice(q*loopElems, loopElems), 0.5)
			}
			c.Step(body)
		}, dag.AtMost(int64(max)), dag.Name("halve"))
		b.Copy(y.All(), x.All(), dag.Name("after"))
	}
}

func TestWhileRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		streams int
	}{
		{"once", 1, 4},
		{"five times, four streams", 5, 4},
		{"five times, one stream", 5, 1},
		{"twenty times", 20, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, halving(tc.n, 100))
			p := plan(t, g, tc.streams)
			if tc.streams > 1 {
				require.Greater(t, len(p.Bodies[g.Ops[len(g.Ops)-2].ID][0].Streams), 1, "the body spreads over streams")
			}
			out := execute(t, p, cpu.Delays(int64(tc.n), 50*time.Microsecond))
			want := float32(1)
			for range tc.n {
				want /= 2
			}
			for i, v := range f32s(out["y"]) {
				require.Equal(t, want, v, "y[%d]", i)
			}
			assert.Equal(t, int32(0), int32(out["flag"][0]), "the loop ends with its flag clear")
		})
	}
}

func TestWhileHitsMax(t *testing.T) {
	g := build(t, halving(10, 3))
	_, err := executor.Execute(context.Background(), cpu.New(), plan(t, g, 4))
	require.Error(t, err)
	opErr, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "halve", opErr.Op)
	assert.Contains(t, err.Error(), `op "halve": the loop ran its 3 iterations (max) and its flag is still set`)
}

// A loop whose max is one iteration says so in the singular.
func TestWhileHitsMaxOfOne(t *testing.T) {
	g := build(t, halving(10, 1))
	_, err := executor.Execute(context.Background(), cpu.New(), plan(t, g, 4))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "halve": the loop ran its one iteration (its max) and its flag is still set`)
}

func TestIfElse(t *testing.T) {
	for _, set := range []bool{true, false} {
		g := build(t, func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.Value(1))
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
			v := 0.0
			if set {
				v = 1
			}
			b.Fill(flag.All(), v)
			b.If(flag.All(), func(then *dag.Builder) {
				then.Fill(x.All(), 7)
			}, func(els *dag.Builder) {
				els.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 3.0)
			}, dag.Name("pick"))
		})
		out := execute(t, plan(t, g, 4))
		want := float32(3)
		if set {
			want = 7
		}
		assert.Equal(t, want, f32s(out["x"])[0], "flag set: %v", set)
	}
}

// TestNestedLoops: an outer loop of 3 iterations runs an inner loop of 4
// and a branch on the inner counter's flag, which the inner loop clears.
func TestNestedLoops(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 64, dag.Value(1))
		hits := b.Buffer("hits", 64, dag.Zeros())
		outer := dagtest.NewCounter(b, "outer", 3)
		inner := dagtest.NewCounter(b, "inner", 4)
		outer.Arm(b)
		b.While(outer.Flag.All(), func(ob *dag.Builder) {
			inner.Arm(ob)
			ob.While(inner.Flag.All(), func(ib *dag.Builder) {
				ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0)
				inner.Step(ib)
			}, dag.AtMost(10), dag.Name("inner_loop"))
			ob.If(inner.Flag.All(), func(then *dag.Builder) {
				then.Fill(hits.All(), -1)
			}, func(els *dag.Builder) {
				els.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), hits, 1.0)
				els.Fill(hits.Slice(0, 4), 1)
			})
			outer.Step(ob)
		}, dag.AtMost(10), dag.Name("outer_loop"))
	})
	p := plan(t, g, 4)
	out := execute(t, p)
	assert.Equal(t, float32(1<<12), f32s(out["x"])[0], "x doubled 3 x 4 times")
	assert.Equal(t, float32(1), f32s(out["hits"])[0], "the inner flag was clear each time")
}

// TestLoopReplayed: a captured graph with a loop gives, replay after
// replay, what eager runs give; spans name body ops by their index.
func TestLoopReplayed(t *testing.T) {
	g := build(t, halving(3, 10))
	p := plan(t, g, 4)
	ctx := context.Background()
	be := cpu.New()
	defer be.Close()

	eager, err := executor.Open(ctx, be, p, executor.WithTiming())
	require.NoError(t, err)
	defer eager.Close()
	replayed, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer replayed.Close()
	graph, err := replayed.Capture(ctx)
	require.NoError(t, err)

	x := g.Buffers[0]
	for run := range 3 {
		require.NoError(t, eager.Run(ctx))
		require.NoError(t, graph.Run(ctx))
		a, err := eager.Read(x)
		require.NoError(t, err)
		b, err := replayed.Read(x)
		require.NoError(t, err)
		require.Equal(t, a, b, "run %d", run)
	}
	want := float32(1)
	for range 9 {
		want /= 2
	}
	data, err := eager.Read(x)
	require.NoError(t, err)
	assert.Equal(t, want, f32s(data)[0])

	// The last run's spans: each body op once per iteration, by index.
	body := map[int]int{}
	for _, sp := range eager.Spans() {
		op := g.OpAt(sp.Op)
		require.NotNil(t, op, "span of op %d", sp.Op)
		if sp.Op >= len(g.Ops) {
			body[sp.Op]++
		}
	}
	assert.Len(t, body, len(g.Nested))
	for i, n := range body {
		assert.Equal(t, 3, n, "op %s", g.OpAt(i).Name)
	}
}

func TestLoopFailOp(t *testing.T) {
	g := build(t, halving(3, 10))
	p := plan(t, g, 4)
	name := g.Nested[1].Name
	s, err := executor.Open(context.Background(), cpu.New(), p, executor.WithFailOp(name))
	require.NoError(t, err)
	defer s.Close()
	for range 2 { // the session runs again after the failure
		err = s.Run(context.Background())
		require.ErrorIs(t, err, executor.ErrInjected)
		opErr, ok := errors.AsType[*dag.OpError](err)
		require.True(t, ok)
		assert.Equal(t, name, opErr.Op)
	}
}

func TestLoopChaosAndClose(t *testing.T) {
	g := build(t, halving(50, 100))
	p := plan(t, g, 4)
	s, err := executor.Open(context.Background(), cpu.New(), p, executor.WithChaos(7))
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background()))

	// Close while a long loop runs: the run ends with an error, promptly.
	slow := build(t, func(b *dag.Builder) {
		c := dagtest.NewCounter(b, "flag", 1000)
		c.Arm(b)
		b.While(c.Flag.All(), func(body *dag.Builder) {
			body.Launch(dag.Spin, dag.Grid1(1), dag.Threads(1), 200.0)
			c.Step(body)
		}, dag.Name("slow"))
	})
	s2, err := executor.Open(context.Background(), cpu.New(), plan(t, slow, 2))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s2.Run(context.Background()) }()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, s2.Close())
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not end after Close")
	}
	require.NoError(t, s.Close())
}
