//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

// TestLoopIterationSpansGPU: under CUPTI, every body op with device work
// has one span per time it ran (per iteration of each loop around it),
// in eager runs and in each of several replays launched back to back: an
// outer loop of 2 iterations around a kernel, a fill, an inner loop of 3
// and the counters' copies.
//
// It runs in a process of its own: CUPTI names the nodes of conditional
// bodies only for the first graphs of a process that use their kernels
// (iterations.go), which other tests here would have used up.
func TestLoopIterationSpansGPU(t *testing.T) {
	if inFreshProcess(t, "TestLoopIterationSpansGPU") {
		return
	}
	b := dag.New()
	x := b.Buffer("x", 64, dag.Value(1))
	outer := dagtest.NewCounter(b, "outer", 2)
	inner := dagtest.NewCounter(b, "inner", 3)
	outer.Arm(b)
	b.While(outer.Flag.All(), func(ob *dag.Builder) {
		ob.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 8.0, dag.Name("in_outer"))
		inner.Arm(ob)
		ob.While(inner.Flag.All(), func(ib *dag.Builder) {
			ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 0.5, dag.Name("in_inner"))
			inner.Step(ib)
		}, dag.AtMost(10), dag.Name("inner_loop"))
		outer.Step(ob)
	}, dag.AtMost(10), dag.Name("outer_loop"))
	g, err := b.Build()
	require.NoError(t, err)
	checkIterationSpans(t, g, x)
}

// TestCondInLastKernelSpansGPU is TestLoopIterationSpansGPU with loops
// whose body's last kernel, a set_flag, sets their condition: its records
// bound the iterations, in a process of its own too.
func TestCondInLastKernelSpansGPU(t *testing.T) {
	if inFreshProcess(t, "TestCondInLastKernelSpansGPU") {
		return
	}
	b := dag.New()
	x := b.Buffer("x", 64, dag.Value(1))
	one := b.Buffer("one", 4, dag.Value(1))
	var loops []*dag.Op
	counted := func(b, top *dag.Builder, name string, trips float64, work func(body *dag.Builder)) {
		counter := top.Buffer(name+"_count", 4)
		flag := top.Buffer(name+"_flag", 4, dag.Of(dag.I32))
		b.Fill(counter.All(), trips, dag.Name(name+"_reset"))
		b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name(name+"_arm"))
		loops = append(loops, b.While(flag.All(), func(body *dag.Builder) {
			work(body)
			countDown(body, counter, one, flag, name+"_again")
		}, dag.AtMost(10), dag.Name(name+"_loop")))
	}
	counted(b, b, "outer", 2, func(ob *dag.Builder) {
		ob.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 8.0, dag.Name("in_outer"))
		counted(ob, b, "inner", 3, func(ib *dag.Builder) {
			ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 0.5, dag.Name("in_inner"))
		})
	})
	g, err := b.Build()
	require.NoError(t, err)
	for _, l := range loops {
		require.NotNil(t, l.CondSetter(), "%s ends in its set_flag", l.Name)
	}
	checkIterationSpans(t, g, x)
}

// openTraced opens p on be timed op by op by CUPTI; without CUPTI it
// closes the session and skips, or fails where a GPU is required.
func openTraced(tb testing.TB, be *Backend, p *planner.Plan) *executor.Session {
	tb.Helper()
	s, err := executor.Open(context.Background(), be, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
	require.NoError(tb, err)
	if src, why, _ := s.TimingSource(); src != TimingCUPTI {
		s.Close()
		requireGPU(tb, "timing by %s, not CUPTI: %s", src, why)
	}
	return s
}

// inFreshProcess runs test name in a process of its own and reports true
// once it did (or skips without a GPU); false in that process.
func inFreshProcess(t *testing.T, name string) bool {
	if os.Getenv("DAGRUN_FRESH_PROCESS") != "" {
		return false
	}
	gpuBackend(t) // skips or fails here as every GPU test does
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "DAGRUN_FRESH_PROCESS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a process of its own:\n%s", out)
	require.NoError(t, err)
	return true
}

// checkIterationSpans runs g, a loop named outer_loop of 2 iterations
// around one named inner_loop of 3, each scaling x (by 8, then by 0.5),
// eagerly and replayed under CUPTI, and checks that each body op has one
// span per time it ran and that x ends at 1.
func checkIterationSpans(t *testing.T, g *dag.Graph, x *dag.Buffer) {
	be := gpuBackend(t)
	// How many times each body op runs in one run of the graph.
	runs := map[int]int{}
	var count func(ops []*dag.Op, times int)
	count = func(ops []*dag.Op, times int) {
		for _, op := range ops {
			if op.Index >= len(g.Ops) {
				runs[op.Index] = times
			}
			switch op.Name {
			case "outer_loop":
				count(op.Control.Body.Ops, times*2)
			case "inner_loop":
				count(op.Control.Body.Ops, times*3)
			}
		}
	}
	count(g.Ops, 1)
	require.Len(t, runs, len(g.Nested))
	check := func(what string, spans []executor.Span) {
		t.Helper()
		got := map[int]int{}
		for _, sp := range spans {
			if sp.Op >= len(g.Ops) {
				got[sp.Op]++
			}
			assert.LessOrEqual(t, sp.Start, sp.End, "%s: op %s", what, g.OpAt(sp.Op).Name)
		}
		var wrong []string
		for i, n := range runs {
			if got[i] != n {
				wrong = append(wrong, fmt.Sprintf("%s %d (want %d)", g.OpAt(i).Name, got[i], n))
			}
		}
		slices.Sort(wrong)
		assert.Empty(t, wrong, "%s: spans per body op, of %d spans", what, len(spans))
	}

	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	ctx := context.Background()
	s := openTraced(t, be, p)
	defer s.Close()
	for run := range 2 {
		require.NoError(t, s.Run(ctx))
		check("eager run "+string(rune('1'+run)), s.Spans())
	}
	out, err := s.Read(x)
	require.NoError(t, err)
	assert.Equal(t, f32bytes(1), out[:4], "x times 8, then halved 3 times, in each iteration")

	graph, err := s.Capture(ctx)
	require.NoError(t, err)
	defer graph.Close()
	require.NoError(t, graph.Run(ctx))
	_, err = graph.ReplaySpans()
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, graph.Launch(ctx))
	}
	require.NoError(t, graph.Sync(ctx))
	reps, err := graph.ReplaySpans()
	require.NoError(t, err)
	require.Len(t, reps, 3)
	for _, r := range reps {
		check("replay "+string(rune('0'+r.Launch)), r.Spans)
	}
}
