package planner_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/perf"
)

var one = dag.Grid1(1)

// deviceOnly is the default cost model without overheads: plans whose
// figures these tests work out by hand from the ops' durations.
var deviceOnly = perf.WithOverheads(nil, perf.Overheads{})

// plan plans g and checks what every plan must satisfy.
func mustPlan(t *testing.T, g *dag.Graph, opts ...planner.Option) *planner.Plan {
	t.Helper()
	p, err := planner.New(g, opts...)
	require.NoError(t, err)
	require.NoError(t, ordered(p))
	return p
}

// ordered is a checker for these tests, independent of how New decides:
// it replays the steps with a full vector clock per stream and checks that
// every dependency of every op is ordered before it, that every event is
// recorded once before its waits, and that the figures match the steps.
func ordered(p *planner.Plan) error {
	ops := p.Graph.Ops
	ns := len(p.Streams)
	clock := make([][]int, ns) // clock[s][t]: s is after the first clock[s][t] ops of t
	for s := range clock {
		clock[s] = make([]int, ns)
	}
	events := make([][]int, p.Events)
	stream := make([]int, len(ops))
	pos := make([]int, len(ops))
	ran := make([]bool, len(ops))
	waits := 0
	for _, st := range p.Steps {
		s := int(st.Stream)
		switch st.Kind {
		case planner.Run:
			op := ops[st.Op]
			if ran[st.Op] {
				return fmt.Errorf("op %s runs twice", op.Name)
			}
			for _, d := range op.Deps {
				if !ran[d] || clock[s][stream[d]] < pos[d] {
					return fmt.Errorf("op %s is not ordered after its dependency %s", op.Name, ops[d].Name)
				}
			}
			clock[s][s]++
			ran[st.Op], stream[st.Op], pos[st.Op] = true, s, clock[s][s]
			if int(p.OpStream[st.Op]) != s {
				return fmt.Errorf("op %s runs on stream %d, OpStream says %d", op.Name, s, p.OpStream[st.Op])
			}
		case planner.Record:
			if events[st.Event] != nil {
				return fmt.Errorf("event %d is recorded twice", st.Event)
			}
			events[st.Event] = slices.Clone(clock[s])
		case planner.Wait:
			waits++
			if events[st.Event] == nil {
				return fmt.Errorf("event %d is waited for before it is recorded", st.Event)
			}
			for u, x := range events[st.Event] {
				if u != s {
					clock[s][u] = max(clock[s][u], x)
				}
			}
		}
	}
	for i, r := range ran {
		if !r {
			return fmt.Errorf("op %s never runs", ops[i].Name)
		}
	}
	cross := 0
	for _, op := range ops {
		for _, d := range op.Deps {
			if stream[d] != stream[op.ID] {
				cross++
			}
		}
	}
	switch {
	case waits != p.Stats.Waits:
		return fmt.Errorf("%d waits, Stats says %d", waits, p.Stats.Waits)
	case cross != p.Stats.CrossEdges:
		return fmt.Errorf("%d cross-stream edges, Stats says %d", cross, p.Stats.CrossEdges)
	case p.Stats.Ops != len(ops) || p.Stats.Streams != ns:
		return fmt.Errorf("stats %+v for %d ops on %d streams", p.Stats, len(ops), ns)
	case p.Stats.Makespan < p.Stats.CriticalPath:
		return fmt.Errorf("makespan %v beats the critical path %v", p.Stats.Makespan, p.Stats.CriticalPath)
	}
	return nil
}

func build(t *testing.T, declare func(b *dag.Builder)) *dag.Graph {
	t.Helper()
	b := dag.New()
	declare(b)
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// fanOut declares n independent branches of equal cost, each on its own
// buffer, and a join that reads them all.
func fanOut(n int) func(b *dag.Builder) {
	return func(b *dag.Builder) {
		sum := b.Buffer("sum", 64, dag.Zeros())
		parts := make([]*dag.Buffer, n)
		for i := range parts {
			parts[i] = b.Buffer(fmt.Sprintf("part%d", i), 64, dag.Zeros())
			b.Launch(dag.Iota, one, one, parts[i], float64(i), dag.Name(fmt.Sprintf("branch%d", i)), dag.Cost(10*time.Microsecond))
		}
		for i := range parts {
			b.Launch(dag.Axpy, one, one, sum, parts[i], 1.0, dag.Name(fmt.Sprintf("join%d", i)), dag.Cost(time.Microsecond))
		}
	}
}

func streamOf(p *planner.Plan, name string) planner.Stream {
	for _, op := range p.Graph.Ops {
		if op.Name == name {
			return p.Streams[p.OpStream[op.ID]]
		}
	}
	panic("no op " + name)
}

func TestChainStaysOnOneStream(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 256, dag.Zeros())
		b.Launch(dag.Iota, one, one, x, 0.0)
		for range 20 {
			b.Launch(dag.Scale, one, one, x, 2.0)
		}
	})
	for _, streams := range []int{1, 4, 32} {
		p := mustPlan(t, g, planner.Streams(streams), planner.Cost(deviceOnly))
		assert.Equal(t, 1, p.Stats.Streams, "streams=%d", streams)
		assert.Zero(t, p.Stats.CrossEdges)
		assert.Zero(t, p.Stats.Waits)
		assert.Equal(t, p.Stats.CriticalPath, p.Stats.Makespan)
	}
}

func TestFanOutUsesStreamsUpToTheBudget(t *testing.T) {
	g := build(t, fanOut(8))
	for _, tc := range []struct {
		budget, streams int
		waits           int
	}{
		{budget: 1, streams: 1, waits: 0},
		{budget: 2, streams: 2, waits: 1},
		{budget: 4, streams: 4, waits: 3},
		{budget: 8, streams: 8, waits: 7},
		{budget: 32, streams: 8, waits: 7},
	} {
		t.Run(fmt.Sprintf("budget=%d", tc.budget), func(t *testing.T) {
			p := mustPlan(t, g, planner.Streams(tc.budget), planner.Cost(deviceOnly))
			assert.Equal(t, tc.streams, p.Stats.Streams)
			assert.Equal(t, tc.waits, p.Stats.Waits, "the join chain waits once for each other stream: its waits gather before its first op, where each stream's last branch implies the others")
			// Branches cost 10us, the joins 1us each.
			width := min(tc.budget, 8)
			rounds := (8 + width - 1) / width
			want := time.Duration(rounds)*10*time.Microsecond + 8*time.Microsecond
			assert.Equal(t, want, p.Stats.Makespan)
			assert.Equal(t, 18*time.Microsecond, p.Stats.CriticalPath)
		})
	}
}

func TestBudgetOneNeedsNoWaits(t *testing.T) {
	// Graphs of kernels only: copies would have streams of their own.
	for seed := range int64(50) {
		g := dagtest.Shape(200, 1+int(seed)%16, seed)
		p := mustPlan(t, g, planner.Streams(1))
		require.Equal(t, 1, p.Stats.Streams, "seed %d", seed)
		require.Zero(t, p.Stats.Waits, "seed %d", seed)
		require.Zero(t, p.Events, "seed %d", seed)
	}
}

// In the diamond top -> left, right -> bottom, left continues top's stream
// and right waits for top on a second stream. bottom continues one of them
// and waits for the other; with a third op after right reading top's
// output, the wait for top is already implied.
func TestImpliedWaitsAreLeftOut(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x, y, z, w := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros()), b.Buffer("z", 64, dag.Zeros()), b.Buffer("w", 64, dag.Zeros())
		b.Launch(dag.Iota, one, one, x, 1.0, dag.Name("top"))
		b.Launch(dag.Axpy, one, one, y, x, 0.5, dag.Name("left"), dag.Cost(20*time.Microsecond))
		b.Launch(dag.Axpy, one, one, z, x, 0.5, dag.Name("right"))
		b.Launch(dag.Add, one, one, w, z, x, dag.Name("after-right")) // needs top too: implied
		b.Launch(dag.Add, one, one, w, y, z, dag.Name("bottom"))
	})
	p := mustPlan(t, g, planner.Streams(4))
	assert.Equal(t, streamOf(p, "top"), streamOf(p, "left"))
	assert.NotEqual(t, streamOf(p, "top"), streamOf(p, "right"))
	assert.Equal(t, streamOf(p, "right"), streamOf(p, "after-right"))
	assert.Equal(t, streamOf(p, "left"), streamOf(p, "bottom"))
	// top->right, top->after-right, after-right->bottom, right->bottom cross;
	// right's wait implies top->after-right, and after-right's implies right->bottom.
	assert.Equal(t, 4, p.Stats.CrossEdges)
	assert.Equal(t, 2, p.Stats.Waits)
}

// Every wait New inserts is needed: without it, some dependency is no
// longer ordered.
func TestEveryWaitIsNeeded(t *testing.T) {
	for seed := range int64(40) {
		g := dagtest.Random(dagtest.Config{Ops: 60, Buffers: 6, Seed: seed, Ranges: true, Priorities: seed%2 == 0,
			Temporaries: true, HostBuffers: true, After: true})
		p := mustPlan(t, g, planner.Streams(1+int(seed)%6))
		for i, st := range p.Steps {
			if st.Kind != planner.Wait {
				continue
			}
			q := *p
			q.Steps = slices.Delete(slices.Clone(p.Steps), i, i+1)
			q.Stats.Waits--
			assert.Error(t, ordered(&q), "seed %d: wait step %d for event %d is implied by others", seed, i, st.Event)
		}
	}
}

func TestRandomPlansAreOrdered(t *testing.T) {
	for seed := range int64(300) {
		cfg := dagtest.Config{Ops: 80, Buffers: 4 + int(seed)%8, Seed: seed, Ranges: seed%2 == 0, Priorities: seed%3 == 0,
			Temporaries: seed%4 != 0, HostBuffers: seed%5 != 0, Devices: 1 + int(seed)%3, After: seed%2 == 1}
		g := dagtest.Random(cfg)
		p, err := planner.New(g, plannertest.Options(planner.Options{Streams: 1 + int(seed)%32, SharedCopyStreams: seed%7 == 0})...)
		require.NoError(t, err)
		require.NoError(t, ordered(p), "seed %d", seed)
		require.LessOrEqual(t, p.Stats.Waits, p.Stats.CrossEdges)
	}
}

func TestPrioritiesGetTheirOwnStreams(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		urgent, bulk := b.Buffer("urgent", 64, dag.Zeros()), b.Buffer("bulk", 4096, dag.Zeros())
		for i := range 4 {
			b.Launch(dag.Scale, one, one, bulk, 0.5, dag.Name(fmt.Sprintf("bulk%d", i)), dag.Low)
			b.Launch(dag.Scale, one, one, urgent, 1.5, dag.Name(fmt.Sprintf("urgent%d", i)), dag.High)
		}
		b.Launch(dag.Add, one, one, urgent, urgent, urgent, dag.Name("odd"), dag.Priority(7))
	})
	p := mustPlan(t, g, planner.Streams(1))
	require.Len(t, p.Streams, 3)
	for _, op := range g.Ops {
		assert.Equal(t, op.Priority, p.Streams[p.OpStream[op.ID]].Priority, op.Name)
	}
	assert.Equal(t, "dev0.low.compute0", streamOf(p, "bulk0").Name)
	assert.Equal(t, "dev0.high.compute0", streamOf(p, "urgent0").Name)
	assert.Equal(t, "dev0.prio7.compute0", streamOf(p, "odd").Name)
	assert.Zero(t, p.Stats.CrossEdges-1, "only odd depends on another stream")
}

func TestCopiesGetStreamsPerDirection(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		in := b.Buffer("in", 1<<20, dag.PinnedHost(), dag.Zeros())
		page := b.Buffer("page", 1<<20, dag.PageableHost(), dag.Zeros())
		host := b.Buffer("host", 1<<20, dag.PinnedHost(), dag.Zeros())
		x, y := b.Buffer("x", 1<<20, dag.Zeros()), b.Buffer("y", 1<<20, dag.Zeros())
		b.Copy(x.All(), in.All(), dag.Name("up"))
		b.Copy(y.All(), x.All(), dag.Name("across"))
		b.Launch(dag.Scale, one, one, y, 2.0, dag.Name("scale"))
		b.Copy(page.All(), y.All(), dag.Name("down"))
		b.Copy(host.All(), page.All(), dag.Name("host"))
		b.Copy(x.All(), page.All(), dag.Name("up-again"))
	})
	for _, tc := range []struct {
		shared bool
		want   map[string]string
	}{
		{false, map[string]string{"up": "dev0.normal.h2d", "across": "dev0.normal.d2d", "scale": "dev0.normal.compute0",
			"down": "dev0.normal.d2h", "host": "dev0.normal.d2d", "up-again": "dev0.normal.h2d"}},
		{true, map[string]string{"up": "dev0.normal.copy", "across": "dev0.normal.copy", "scale": "dev0.normal.compute0",
			"down": "dev0.normal.copy", "host": "dev0.normal.copy", "up-again": "dev0.normal.copy"}},
	} {
		p := mustPlan(t, g, plannertest.Options(planner.Options{SharedCopyStreams: tc.shared})...)
		for op, stream := range tc.want {
			assert.Equal(t, stream, streamOf(p, op).Name, "%s, shared=%v", op, tc.shared)
		}
	}
}

// A temporary written on one stream and read on two others is freed only
// after both readers: the free's stream waits for each or is already
// ordered after it.
func TestFreeFollowsEveryReader(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		tmp := b.Buffer("tmp", 256, dag.Temporary())
		a, c := b.Buffer("a", 256, dag.Zeros()), b.Buffer("c", 256, dag.Zeros())
		b.Fill(tmp.All(), 1, dag.Name("init"))
		b.Launch(dag.Axpy, one, one, a, tmp, 1.0, dag.Name("reader1"), dag.Cost(50*time.Microsecond))
		b.Launch(dag.Axpy, one, one, c, tmp, 1.0, dag.Name("reader2"), dag.Cost(80*time.Microsecond))
		b.Launch(dag.Iota, one, one, b.Buffer("d", 256, dag.Zeros()), 0.0, dag.Name("other"), dag.Cost(30*time.Microsecond))
	})
	p := mustPlan(t, g, planner.Streams(3))
	free := g.Ops[slices.IndexFunc(g.Ops, func(o *dag.Op) bool { return o.Kind == dag.Free })]
	for _, reader := range []string{"reader1", "reader2"} {
		require.True(t, slices.ContainsFunc(free.Deps, func(d int32) bool { return g.Ops[d].Name == reader }), "free depends on %s", reader)
	}
	assert.NotEqual(t, streamOf(p, "reader1"), streamOf(p, "reader2"))
	assert.NoError(t, ordered(p))

	// Without the waits before the free, it races a reader.
	q := *p
	q.Steps = slices.DeleteFunc(slices.Clone(p.Steps), func(s planner.Step) bool {
		return s.Kind == planner.Wait && s.Op == int32(free.ID)
	})
	require.Less(t, len(q.Steps), len(p.Steps), "the free needs a wait")
	q.Stats.Waits -= len(p.Steps) - len(q.Steps)
	assert.ErrorContains(t, ordered(&q), "op free:tmp is not ordered after its dependency reader")
}

func TestDeterministic(t *testing.T) {
	for seed := range int64(20) {
		cfg := dagtest.Config{Ops: 200, Buffers: 10, Seed: seed, Ranges: true, Priorities: true, Temporaries: true, HostBuffers: true, Devices: 2, After: true}
		streams := planner.Streams(1 + int(seed)%8)
		p1, err := planner.New(dagtest.Random(cfg), streams)
		require.NoError(t, err)
		p2, err := planner.New(dagtest.Random(cfg), streams)
		require.NoError(t, err)
		assert.Equal(t, p1.Streams, p2.Streams)
		assert.Equal(t, p1.Steps, p2.Steps)
		assert.Equal(t, p1.OpStream, p2.OpStream)
		assert.Equal(t, p1.Stats, p2.Stats)
	}
}

func TestStreamStepsPartitionTheSteps(t *testing.T) {
	p := mustPlan(t, dagtest.Random(dagtest.Config{Ops: 100, Buffers: 6, Seed: 3, HostBuffers: true}))
	n := 0
	for s := range p.Streams {
		steps := p.StreamSteps(s)
		require.NotEmpty(t, steps)
		for _, st := range steps {
			assert.Equal(t, int32(s), st.Stream)
		}
		n += len(steps)
	}
	assert.Equal(t, len(p.Steps), n)
	assert.Empty(t, p.StreamSteps(len(p.Streams)))
}

func TestErrors(t *testing.T) {
	good := build(t, fanOut(2))
	for _, tc := range []struct {
		name  string
		graph *dag.Graph
		opts  []planner.Option
		want  string
	}{
		{"too many streams", good, []planner.Option{planner.Streams(33)}, "stream budget 33 is out of range (use 1 to 32"},
		{"negative streams", good, []planner.Option{planner.Streams(-1)}, "stream budget -1 is out of range"},
		{"no graph", nil, nil, "no graph"},
		{"negative device", &dag.Graph{Ops: []*dag.Op{{Name: "k", Kind: dag.Launch, Device: -2}}}, nil,
			`op "k": device -2 is negative`},
		{"dependency forward", &dag.Graph{Ops: []*dag.Op{{Name: "a", Kind: dag.Host, Deps: []int32{1}}, {ID: 1, Name: "b", Kind: dag.Host}}},
			nil, `op "a": depends on op 1, which does not come before it`},
		{"copy without views", &dag.Graph{Ops: []*dag.Op{{Name: "c", Kind: dag.Copy}}}, nil,
			`op "c": copy has 0 accesses`},
		{"unknown kind", &dag.Graph{Ops: []*dag.Op{{Name: "u", Kind: 42}}}, nil, `op "u": unknown kind 42`},
		{"missing op", &dag.Graph{Ops: []*dag.Op{nil}}, nil, `op "#0": op is missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planner.New(tc.graph, tc.opts...)
			assert.Nil(t, p)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestMakespanAgainstCriticalPath(t *testing.T) {
	// Two independent chains of 3 x 10us: one stream serialises them, two
	// run them side by side at the critical-path bound.
	g := build(t, func(b *dag.Builder) {
		x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros())
		for range 3 {
			b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(10*time.Microsecond))
			b.Launch(dag.Scale, one, one, y, 2.0, dag.Cost(10*time.Microsecond))
		}
	})
	for _, tc := range []struct {
		streams  int
		makespan time.Duration
	}{{1, 60 * time.Microsecond}, {2, 30 * time.Microsecond}} {
		p := mustPlan(t, g, planner.Streams(tc.streams), planner.Cost(deviceOnly))
		assert.Equal(t, tc.makespan, p.Stats.Makespan, "streams=%d", tc.streams)
		assert.Equal(t, 30*time.Microsecond, p.Stats.CriticalPath)
	}
}
