package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/verify"
)

// Ordered kinds keep their declaration order under the lookahead too, and
// without the flag the lookahead takes the longest first, as earliest start
// does when all are ready at once.
func TestLookaheadKeepsOrderedKinds(t *testing.T) {
	b := dag.New()
	one := dag.Grid1(1)
	for i, cost := range []time.Duration{time.Microsecond, 5 * time.Microsecond, 50 * time.Microsecond} {
		x := b.Buffer(string(rune('a'+i)), 64, dag.Zeros())
		b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(cost))
	}
	g, err := b.Build()
	require.NoError(t, err)
	opts, err := Options{Streams: 1}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, []int32{2, 1, 0}, runOrder(planOne(g, opts, byLookahead, nil)))
	ordered := planOne(g, opts, byLookahead, func(k dag.OpKind) bool { return k == dag.Launch })
	assert.Equal(t, []int32{0, 1, 2}, runOrder(ordered))
	require.NoError(t, verify.Verify(ordered))
}

// lowerBound is the largest of the critical path, each pool's work over its
// streams, and the host's per-op time for the mode.
func TestLowerBound(t *testing.T) {
	us := time.Microsecond
	b := dag.New()
	one := dag.Grid1(1)
	x := b.Buffer("x", 64, dag.Zeros())
	b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(40*us))
	b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(40*us)) // a chain of 80 us
	for i := range 6 {
		b.Launch(dag.Scale, one, one, b.Buffer(fmt.Sprint("k", i), 64, dag.Zeros()), 2.0, dag.Cost(30*us))
	}
	h, d := b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros()), b.Buffer("d", 64, dag.Zeros())
	b.Copy(d.All(), h.All(), dag.Cost(90*us))
	b.Copy(d.All(), h.All(), dag.Cost(50*us)) // 140 us of uploads on one stream
	g, err := b.Build()
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		streams int
		ov      perf.Overheads
		mode    Mode
		want    time.Duration
	}{
		{"compute work on one stream", 1, perf.Overheads{}, Eager, 260 * us},
		{"uploads on their one stream", 8, perf.Overheads{}, Eager, 140 * us},
		{"eager submissions", 8, perf.Overheads{Submit: 20 * us}, Eager, 200 * us},
		{"replay launches", 8, perf.Overheads{Submit: 20 * us, ReplayOp: 15 * us}, Replay, 150 * us},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := Options{Streams: tc.streams, Cost: perf.WithOverheads(nil, tc.ov), Mode: tc.mode}.withDefaults()
			require.NoError(t, err)
			p := planOne(g, opts, byEarliestStart, nil)
			assert.Equal(t, int64(tc.want), lowerBound(g, opts, p))
			assert.GreaterOrEqual(t, p.Stats.Makespan, tc.want)
		})
	}
	assert.True(t, closeEnough(101, 100))
	assert.False(t, closeEnough(102, 100))
}
