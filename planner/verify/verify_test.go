package verify_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

// handPlan writes plans by hand for a graph: steps name ops, and OpStream
// follows from the Run steps.
type handPlan struct {
	t *testing.T
	g *dag.Graph
}

func (h handPlan) id(name string) int32 {
	for _, op := range h.g.Ops {
		if op.Name == name {
			return int32(op.ID)
		}
	}
	h.t.Fatalf("the graph has no op %q", name)
	return -1
}

func (h handPlan) run(s int32, name string) planner.Step {
	return planner.Step{Kind: planner.Run, Stream: s, Op: h.id(name), Event: -1}
}

func recordStep(s, e int32) planner.Step {
	return planner.Step{Kind: planner.Record, Stream: s, Op: -1, Event: e}
}

func waitStep(s, e int32) planner.Step {
	return planner.Step{Kind: planner.Wait, Stream: s, Op: -1, Event: e}
}

// plan makes a plan of steps on streams compute0..compute<streams-1> of
// device 0 (and, past devices[0], of the devices given), numbering events
// up to the largest one the steps name.
func (h handPlan) plan(streams int, steps ...planner.Step) *planner.Plan {
	p := &planner.Plan{Graph: h.g, Steps: steps, OpStream: make([]int32, len(h.g.Ops))}
	for s := range streams {
		p.Streams = append(p.Streams, planner.Stream{ID: s, Name: fmt.Sprintf("dev0.normal.compute%d", s)})
	}
	for _, st := range steps {
		switch st.Kind {
		case planner.Run:
			if st.Op >= 0 && int(st.Op) < len(p.OpStream) {
				p.OpStream[st.Op] = st.Stream
			}
		default:
			p.Events = max(p.Events, int(st.Event)+1)
		}
	}
	return p
}

// pipelineGraph: a temporary t is filled, read into x, freed; x is then
// read into y; z is written in two disjoint halves.
//
//	alloc:t init produce free:t consume lo hi
func pipelineGraph(t *testing.T) handPlan {
	b := dag.New()
	x, y, z := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros()), b.Buffer("z", 64, dag.Zeros())
	tmp := b.Buffer("t", 64, dag.Temporary())
	b.Fill(tmp.All(), 1, dag.Name("init"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(1), x, tmp, 1.0, dag.Name("produce"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(1), y, x, 1.0, dag.Name("consume"))
	b.Fill(z.Slice(0, 32), 1, dag.Name("lo"))
	b.Fill(z.Slice(32, 32), 2, dag.Name("hi"))
	g, err := b.Build()
	require.NoError(t, err)
	var names []string
	for _, op := range g.Ops {
		names = append(names, op.Name)
	}
	require.Equal(t, []string{"alloc:t", "init", "produce", "free:t", "consume", "lo", "hi"}, names)
	return handPlan{t, g}
}

func TestVerifyHandPlans(t *testing.T) {
	h := pipelineGraph(t)
	r := h.run
	tests := []struct {
		name string
		plan *planner.Plan
		kind verify.Kind // 0 when the plan is right
		ops  []string    // the ops the error names
		msg  string      // a part of the message
	}{
		{name: "one stream", plan: h.plan(1,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "consume"), r(0, "lo"), r(0, "hi"))},
		// lo and hi write disjoint halves of z: they need no order.
		{name: "consumer on another stream after a wait", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), recordStep(0, 0), r(0, "free:t"),
			waitStep(1, 0), r(1, "consume"), r(1, "lo"), r(0, "hi"))},
		{name: "ordered through a third stream", plan: h.plan(3,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), recordStep(0, 0), r(0, "free:t"),
			waitStep(1, 0), r(1, "lo"), recordStep(1, 1),
			waitStep(2, 1), r(2, "consume"), r(2, "hi"))},
		{name: "missing wait", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), recordStep(0, 0), r(0, "free:t"),
			r(1, "consume"), r(1, "lo"), r(0, "hi")),
			kind: verify.UnorderedConflict, ops: []string{"produce", "consume"},
			msg: `op "produce" (dev0.normal.compute0) reads and writes x[0:64) and op "consume" (dev0.normal.compute1) reads it, with no wait between them`},
		{name: "wait on a record made before the producer ran", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), recordStep(0, 0), r(0, "produce"), r(0, "free:t"),
			waitStep(1, 0), r(1, "consume"), r(1, "lo"), r(0, "hi")),
			kind: verify.UnorderedConflict, ops: []string{"produce", "consume"}},
		{name: "ops without conflicts on two streams", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), recordStep(0, 0), r(0, "free:t"),
			waitStep(1, 0), r(1, "consume"), r(0, "lo"), r(0, "hi")),
		},
		{name: "wrong order on one stream", plan: h.plan(1,
			r(0, "alloc:t"), r(0, "init"), r(0, "consume"), r(0, "produce"), r(0, "free:t"), r(0, "lo"), r(0, "hi")),
			kind: verify.UnorderedConflict, ops: []string{"produce", "consume"}, msg: "but runs after it on the same stream"},
		{name: "consumer submitted before the producer", plan: h.plan(2,
			r(1, "consume"), r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "lo"), r(0, "hi")),
			kind: verify.UnorderedConflict, ops: []string{"produce", "consume"}, msg: "submitted after it"},
		{name: "wait before record", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), waitStep(1, 0), recordStep(0, 0), r(0, "free:t"),
			r(1, "consume"), r(1, "lo"), r(0, "hi")),
			kind: verify.WaitBeforeRecord, msg: "before the event is recorded"},
		{name: "event recorded twice", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), recordStep(0, 0), r(0, "free:t"), recordStep(0, 0),
			waitStep(1, 0), r(1, "consume"), r(1, "lo"), r(0, "hi")),
			kind: verify.EventRecordedTwice, msg: "event 0 is recorded twice"},
		{name: "event never recorded", plan: func() *planner.Plan {
			p := h.plan(1, r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "consume"), r(0, "lo"), r(0, "hi"))
			p.Events = 1
			return p
		}(), kind: verify.EventNeverRecorded, msg: "event 0 is never recorded"},
		{name: "free racing a reader on another stream", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), recordStep(0, 0),
			waitStep(1, 0), r(1, "produce"), r(0, "free:t"), recordStep(1, 1),
			waitStep(0, 1), r(0, "consume"), r(0, "lo"), r(0, "hi")),
			kind: verify.UseAfterFree, ops: []string{"produce", "free:t"},
			msg: `op "produce" (dev0.normal.compute1) reads temporary t and op "free:t" (dev0.normal.compute0) frees it, with no wait between them`},
		{name: "use before alloc", plan: h.plan(2,
			r(1, "init"), r(0, "alloc:t"), r(0, "produce"), r(0, "free:t"), r(0, "consume"), r(0, "lo"), r(0, "hi")),
			kind: verify.UseBeforeAlloc, ops: []string{"alloc:t", "init"}},
		{name: "op missing", plan: h.plan(1,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "lo"), r(0, "hi")),
			kind: verify.OpMissing, ops: []string{"consume"}},
		{name: "op twice", plan: h.plan(2,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "consume"), r(1, "consume"), r(0, "lo"), r(0, "hi")),
			kind: verify.OpTwice, ops: []string{"consume"}},
		{name: "OpStream disagrees", plan: func() *planner.Plan {
			p := h.plan(2, r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(0, "consume"), r(0, "lo"), r(0, "hi"))
			p.OpStream[h.id("lo")] = 1
			return p
		}(), kind: verify.OpStreamMismatch, ops: []string{"lo"}},
		{name: "kernel on another device", plan: func() *planner.Plan {
			p := h.plan(2, r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(1, "consume"), r(0, "lo"), r(0, "hi"))
			p.Streams[1].Device = 1
			return p
		}(), kind: verify.WrongDevice, ops: []string{"consume"}},
		{name: "step names a missing stream", plan: h.plan(1,
			r(0, "alloc:t"), r(0, "init"), r(0, "produce"), r(0, "free:t"), r(1, "consume"), r(0, "lo"), r(0, "hi")),
			kind: verify.Malformed, msg: "names stream 1 of 1"},
		{name: "step names a missing op", plan: h.plan(1,
			planner.Step{Kind: planner.Run, Op: 99}),
			kind: verify.Malformed, msg: "runs op 99"},
		{name: "step names a missing event", plan: func() *planner.Plan {
			p := h.plan(1, r(0, "alloc:t"), recordStep(0, 3))
			p.Events = 1
			return p
		}(), kind: verify.Malformed, msg: "event 3 of 1"},
		{name: "unknown step kind", plan: h.plan(1, planner.Step{Kind: 9}), kind: verify.Malformed},
		{name: "no graph", plan: &planner.Plan{}, kind: verify.Malformed},
		{name: "short OpStream", plan: &planner.Plan{Graph: h.g}, kind: verify.Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify.Verify(tt.plan)
			if tt.kind == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var ve *verify.Error
			require.True(t, errors.As(err, &ve), "%T: %v", err, err)
			assert.Equal(t, tt.kind, ve.Kind, "%v", err)
			if tt.ops != nil {
				assert.Equal(t, tt.ops, ve.Ops, "%v", err)
			}
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
	assert.Error(t, verify.Verify(nil))
}

func TestVerifyWriteAfterRead(t *testing.T) {
	b := dag.New()
	x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros())
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(1), y, x.Slice(0, 64), 1.0, dag.Name("read"))
	b.Fill(x.Slice(60, 4), 0, dag.Name("overwrite"))
	g, err := b.Build()
	require.NoError(t, err)
	h := handPlan{t, g}

	err = verify.Verify(h.plan(2, h.run(0, "read"), h.run(1, "overwrite")))
	var ve *verify.Error
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, verify.UnorderedConflict, ve.Kind)
	assert.Equal(t, []string{"read", "overwrite"}, ve.Ops)
	assert.Contains(t, ve.Msg, `reads x[60:64) and op "overwrite" (dev0.normal.compute1) writes it`)

	require.NoError(t, verify.Verify(h.plan(2, h.run(0, "read"), recordStep(0, 0), waitStep(1, 0), h.run(1, "overwrite"))))
}

// TestVerifyConflictsNotDeps shows that Verify computes conflicts from the
// accesses itself: a graph whose Deps were lost still needs its order.
func TestVerifyConflictsNotDeps(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("first"))
	b.Fill(x.Slice(0, 4), 2, dag.Name("second"))
	g, err := b.Build()
	require.NoError(t, err)
	g.Ops[1].Deps = nil
	h := handPlan{t, g}
	err = verify.Verify(h.plan(2, h.run(0, "first"), h.run(1, "second")))
	var ve *verify.Error
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, verify.UnorderedConflict, ve.Kind)
	assert.Contains(t, ve.Msg, "writes x[0:4)")
}

// TestVerifyExplicitAfter: an After edge between ops that share no buffer
// must be ordered too.
func TestVerifyExplicitAfter(t *testing.T) {
	b := dag.New()
	x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros())
	first := b.Fill(x.All(), 1, dag.Name("first"))
	b.Fill(y.All(), 2, dag.Name("second"), dag.After(first))
	g, err := b.Build()
	require.NoError(t, err)
	h := handPlan{t, g}
	err = verify.Verify(h.plan(2, h.run(0, "first"), h.run(1, "second")))
	var ve *verify.Error
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, verify.UnorderedDependency, ve.Kind)
	assert.Equal(t, []string{"first", "second"}, ve.Ops)
	assert.Contains(t, ve.Msg, `op "second" (dev0.normal.compute1) depends on op "first" (dev0.normal.compute0)`)
	require.NoError(t, verify.Verify(h.plan(2, h.run(0, "first"), recordStep(0, 0), waitStep(1, 0), h.run(1, "second"))))
}

// TestVerifyCatchesRemovedWaits takes real plans of random graphs, removes
// each wait in turn, and checks that Verify fails exactly when the brute
// force oracle finds a pair of ops left unordered, naming an unordered pair.
func TestVerifyCatchesRemovedWaits(t *testing.T) {
	caught, harmless := 0, 0
	for seed := int64(0); seed < 300 && caught < 200; seed++ {
		cfg := dagtest.Config{Ops: 30, Buffers: 5, Seed: seed, Ranges: seed%2 == 0, Temporaries: seed%3 == 0,
			Priorities: seed%4 == 0, HostBuffers: seed%5 == 0, After: seed%6 == 0}
		p, err := planner.New(dagtest.Random(cfg), planner.Streams(2+int(seed)%6))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
		require.True(t, plannertest.BruteOrdered(p), "the oracles agree on the plan New made (%+v)", cfg)
		for i, st := range p.Steps {
			if st.Kind != planner.Wait {
				continue
			}
			cut := *p
			cut.Steps = slices.Delete(slices.Clone(p.Steps), i, i+1)
			err := verify.Verify(&cut)
			if plannertest.BruteOrdered(&cut) {
				harmless++
				assert.NoError(t, err, "%+v: removing step %d leaves every pair ordered", cfg, i)
				continue
			}
			caught++
			var ve *verify.Error
			require.True(t, errors.As(err, &ve), "%+v: removing wait step %d leaves a pair unordered, Verify says %v", cfg, i, err)
			assert.Contains(t, []verify.Kind{verify.UnorderedConflict, verify.UnorderedDependency, verify.UseBeforeAlloc, verify.UseAfterFree}, ve.Kind)
			assert.Len(t, ve.Ops, 2)
		}
	}
	require.Positive(t, caught, "some wait of some plan must be needed")
	t.Logf("%d removed waits caught, %d removals harmless", caught, harmless)
}

// ExampleVerify shows the error for a plan that forgot a wait.
func ExampleVerify() {
	b := dag.New()
	x, y := b.Buffer("x", 64, dag.Zeros()), b.Buffer("y", 64, dag.Zeros())
	b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(32), x, 0.0, dag.Name("produce"))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(32), y, x, 2.0, dag.Name("consume"))
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	p := &planner.Plan{
		Graph: g,
		Streams: []planner.Stream{
			{ID: 0, Name: "dev0.normal.compute0"},
			{ID: 1, Name: "dev0.normal.compute1"},
		},
		Steps: []planner.Step{
			{Kind: planner.Run, Stream: 0, Op: 0, Event: -1},
			{Kind: planner.Run, Stream: 1, Op: 1, Event: -1},
		},
		OpStream: []int32{0, 1},
	}
	fmt.Println(verify.Verify(p))
	// Output:
	// plan: unordered conflict: op "produce" (dev0.normal.compute0) writes x[0:64) and op "consume" (dev0.normal.compute1) reads it, with no wait between them
}

func BenchmarkVerify(b *testing.B) {
	b.Run("random200", func(b *testing.B) {
		p, err := planner.New(dagtest.Random(dagtest.Config{Ops: 200, Buffers: 10, Seed: 1, Ranges: true, Temporaries: true,
			Priorities: true, HostBuffers: true, After: true}), planner.Streams(8))
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			if err := verify.Verify(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, ops := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("shape%d", ops), func(b *testing.B) {
			p, err := planner.New(dagtest.Shape(ops, 8, 1), planner.Streams(8))
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if err := verify.Verify(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
