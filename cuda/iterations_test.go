//go:build cgo

package cuda

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
)

// The loop index names, for every body op, its innermost While, and marks
// the Whiles, nested ones included; branch ops outside loops are apart.
func TestLoopIndex(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Value(1))
	outer := dagtest.NewCounter(b, "outer", 2)
	inner := dagtest.NewCounter(b, "inner", 3)
	b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("top"))
	outer.Arm(b)
	b.While(outer.Flag.All(), func(ob *dag.Builder) {
		ob.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("in_outer"))
		inner.Arm(ob)
		ob.While(inner.Flag.All(), func(ib *dag.Builder) {
			ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("in_inner"))
			inner.Step(ib)
		}, dag.Name("inner_loop"))
		outer.Step(ob)
	}, dag.Name("outer_loop"))
	b.If(outer.Flag.All(), func(then *dag.Builder) {
		then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("in_branch"))
	}, nil, dag.Name("branch"))
	g, err := b.Build()
	require.NoError(t, err)
	li := newLoopIndex(g)
	require.NotNil(t, li)
	slot := map[string]int{}
	g.Walk(func(op *dag.Op) { slot[op.Name] = opSlot(op) })
	of := func(name string) int32 { return li.of[slot[name]] }
	assert.Equal(t, int32(notInBody), of("top"))
	assert.Equal(t, int32(notInBody), of("outer_loop"))
	assert.Equal(t, int32(notInBody), of("branch"))
	assert.Equal(t, int32(slot["outer_loop"]), of("in_outer"))
	assert.Equal(t, int32(slot["outer_loop"]), of("inner_loop"))
	assert.Equal(t, int32(slot["inner_loop"]), of("in_inner"))
	assert.Equal(t, int32(inNoLoop), of("in_branch"))
	for name, want := range map[string]bool{"outer_loop": true, "inner_loop": true, "branch": false, "top": false, "in_inner": false} {
		assert.Equal(t, want, li.bounds[slot[name]], name)
	}
	// A setter's records are its loop's too, until its bodies change.
	var inInner, innerLoop *dag.Op
	g.Walk(func(op *dag.Op) {
		switch op.Name {
		case "in_inner":
			inInner = op
		case "inner_loop":
			innerLoop = op
		}
	})
	assert.Equal(t, int32(notInBody), li.cond[slot["in_inner"]])
	li.setsCond(inInner, innerLoop)
	assert.Equal(t, int32(slot["inner_loop"]), li.cond[slot["in_inner"]])
	li.setsCond(inInner, nil)
	assert.Equal(t, int32(notInBody), li.cond[slot["in_inner"]])
	(*loopIndex)(nil).setsCond(inInner, innerLoop) // no index: nothing to note
	plain := dag.New()
	plain.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(1))
	pg, err := plain.Build()
	require.NoError(t, err)
	assert.Nil(t, newLoopIndex(pg), "no bodies, no index")
}

// A body op's records are split into iterations by the records of its
// loop's own kernels (the enter kernel, then one per iteration), in
// replays and eager runs alike, and go to the replay that was running
// when they began; a branch's body op outside loops has one span per run;
// the loop op keeps one span.
func TestCUPTIIterationSpans(t *testing.T) {
	const (
		top, loop, a, bb, branchOp = 0, 1, 2, 3, 4
	)
	li := &loopIndex{of: []int32{notInBody, notInBody, loop, loop, inNoLoop}, bounds: []bool{false, true, false, false, false}}
	k := func(replay, op int64, start, end uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Replay: replay, Op: op, Start: start, End: end, GraphNodeID: uint64(op + 1)}
	}
	// As CUPTI gives them: the records of body ops and of the loop's
	// kernels inside its body carry no launch (replay -1) even in replays;
	// the enter kernel, a node of the graph itself, does.
	var recs []activityRecord
	for _, run := range []struct {
		replay int64
		at     uint64
	}{{-1, 100}, {5, 200}, {6, 300}} {
		t0 := run.at
		recs = append(recs,
			k(run.replay, top, t0, t0+1),
			k(run.replay, loop, t0+2, t0+3), // enter
			k(-1, a, t0+4, t0+6), k(-1, bb, t0+4, t0+7),
			k(-1, loop, t0+8, t0+9), // end of iteration 1
			k(-1, a, t0+10, t0+11), k(-1, a, t0+11, t0+13), k(-1, bb, t0+10, t0+12),
			k(-1, loop, t0+14, t0+15), // end of iteration 2
			k(-1, branchOp, t0+20, t0+21),
		)
	}
	type span struct {
		replay, op int
		start, end time.Duration
	}
	var want []span
	for _, run := range []struct {
		replay int
		at     time.Duration
	}{{-1, 0}, {5, 100}, {6, 200}} {
		t0 := run.at
		want = append(want,
			span{run.replay, top, t0, t0 + 1},
			span{run.replay, loop, t0 + 2, t0 + 15},
			span{run.replay, a, t0 + 4, t0 + 6}, span{run.replay, a, t0 + 10, t0 + 13},
			span{run.replay, bb, t0 + 4, t0 + 7}, span{run.replay, bb, t0 + 10, t0 + 12},
			span{run.replay, branchOp, t0 + 20, t0 + 21},
		)
	}
	for _, maxCells := range []int{1 << 10, 0} {
		c := &cuptiTiming{origin: 100, loops: li, ops: []cuptiOp{{op: top}, {op: loop}}}
		for op := range 5 {
			c.setStream(op, 0)
		}
		var got []span
		c.spans(slices.Clone(recs), maxCells, func(replay, op, stream int, start, end time.Duration) {
			got = append(got, span{replay, op, start, end})
		})
		assert.ElementsMatch(t, want, got, "maxCells %d", maxCells)
		assert.Zero(t, c.unnamed)
	}
}

// A While whose body's last kernel sets its condition has no kernel of
// its own in the body: the setter's records bound the iterations and end
// the loop's span, and the setter still has a span per iteration, in
// replays and eager runs alike.
func TestCUPTIIterationSpansCondSetter(t *testing.T) {
	const top, loop, a, set = 0, 1, 2, 3
	li := &loopIndex{of: []int32{notInBody, notInBody, loop, loop}, bounds: []bool{false, true, false, false},
		cond: []int32{notInBody, notInBody, notInBody, loop}}
	k := func(replay, op int64, start, end uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Replay: replay, Op: op, Start: start, End: end, GraphNodeID: uint64(op + 1)}
	}
	type span struct {
		replay, op int
		start, end time.Duration
	}
	var recs []activityRecord
	var want []span
	for _, run := range []struct{ replay, at int }{{-1, 100}, {5, 200}} {
		t0 := uint64(run.at)
		recs = append(recs,
			k(int64(run.replay), top, t0, t0+1),
			k(int64(run.replay), loop, t0+2, t0+3),       // enter
			k(-1, a, t0+4, t0+6), k(-1, set, t0+7, t0+8), // iteration 1
			k(-1, a, t0+9, t0+10), k(-1, set, t0+11, t0+12), // iteration 2
		)
		d := time.Duration(run.at - 100)
		want = append(want,
			span{run.replay, top, d, d + 1},
			span{run.replay, loop, d + 2, d + 12},
			span{run.replay, a, d + 4, d + 6}, span{run.replay, a, d + 9, d + 10},
			span{run.replay, set, d + 7, d + 8}, span{run.replay, set, d + 11, d + 12},
		)
	}
	c := &cuptiTiming{origin: 100, loops: li, ops: []cuptiOp{{op: top}, {op: loop}}}
	for op := range 4 {
		c.setStream(op, 0)
	}
	var got []span
	c.spans(recs, 1<<10, func(replay, op, stream int, start, end time.Duration) {
		got = append(got, span{replay, op, start, end})
	})
	assert.ElementsMatch(t, want, got)
	assert.Zero(t, c.unnamed)
}

// A record of a conditional body's node runs as a further place of the
// top graph's clone; it is named by the node at that place in the body
// clones that follow it, in graph id order, as the driver lays them out.
func TestBodyNodeResolved(t *testing.T) {
	clones := map[uint64]uint64{
		9<<32 | 0: 7<<32 | 0, 9<<32 | 1: 7<<32 | 1, // the top graph's clone
		10<<32 | 0: 8<<32 | 0, 10<<32 | 1: 8<<32 | 1, // the first body's
		11<<32 | 0: 6<<32 | 0, // the second body's
	}
	nodeOps := map[uint64]int64{7<<32 | 0: 0, 8<<32 | 0: 1, 8<<32 | 1: 0, 6<<32 | 0: 5}
	recs := []activityRecord{
		{Kind: activityKernel, GraphNodeID: 9<<32 | 0, Start: 1, End: 2},
		{Kind: activityKernel, GraphNodeID: 9<<32 | 2, Start: 1, End: 2},
		{Kind: activityKernel, GraphNodeID: 9<<32 | 3, Start: 1, End: 2},
		{Kind: activityKernel, GraphNodeID: 9<<32 | 4, Start: 1, End: 2},
		{Kind: activityKernel, GraphNodeID: 9<<32 | 5, Start: 1, End: 2}, // past every body
	}
	got := resolveRecords(recs, newCorrelations(), clones, nodeOps)
	require.Len(t, got, 5)
	assert.Equal(t, []int64{0, 1, 0, 5, -1}, []int64{got[0].Op, got[1].Op, got[2].Op, got[3].Op, got[4].Op})
	assert.Equal(t, uint64(9<<32|5), got[4].GraphNodeID, "an unnamed record keeps its node")
	assert.Equal(t, uint64(8<<32|0), got[1].GraphNodeID, "a named one names the body's node")
}

// A loop's span in a replay runs from its enter kernel to the
// dr_cond_exit after its conditional node, both nodes of the replayed
// graph, even where CUPTI named its body's records by no op of the run
// (stale node ids): without the exit kernel it ended with the enter
// kernel, a microsecond for a loop of milliseconds.
func TestCUPTILoopSpanUnnamedBody(t *testing.T) {
	const top, loop = 0, 1
	li := &loopIndex{of: []int32{notInBody, notInBody, loop}, bounds: []bool{false, true, false},
		cond: []int32{notInBody, notInBody, loop}}
	k := func(replay, op int64, start, end uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Replay: replay, Op: op, Start: start, End: end, GraphNodeID: 1}
	}
	body := []activityRecord{k(-1, -1, 110, 120), k(-1, -1, 120, 130), k(-1, -1, 990, 1000)} // unnamed
	for _, tc := range []struct {
		name     string
		exit     bool
		from, to time.Duration
	}{
		{"with the exit kernel", true, 2, 1010},
		{"enter alone", false, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := append([]activityRecord{k(5, top, 100, 101), k(5, loop, 102, 103)}, body...)
			if tc.exit {
				recs = append(recs, k(5, loop, 1005, 1110))
			}
			c := &cuptiTiming{origin: 100, loops: li}
			for op := range 3 {
				c.setStream(op, 0)
			}
			got := map[int][2]time.Duration{}
			c.spans(recs, 1<<10, func(replay, op, stream int, start, end time.Duration) {
				assert.Equal(t, 5, replay)
				got[op] = [2]time.Duration{start, end}
			})
			assert.Equal(t, [2]time.Duration{tc.from, tc.to}, got[loop])
			assert.Equal(t, 3, c.unnamed, "the body's records")
		})
	}
}
