package planner_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// TestStreamsIsPerPriority: the Streams option bounds the compute streams of
// each device and priority, as its doc says; copy streams come on top.
func TestStreamsIsPerPriority(t *testing.T) {
	b := dag.New()
	in := b.Array("in", dag.F32, 4096, dag.PinnedHost(), dag.Zeros())
	out := b.Array("out", dag.F32, 4096, dag.PinnedHost())
	for i := range 8 {
		x := b.Array(fmt.Sprint("x", i), dag.F32, 512)
		b.Copy(x.All(), in.Slice(int64(i)*2048, 2048))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(256), x, 2.0, dag.Priority(i%2))
		b.Copy(out.Slice(int64(i)*2048, 2048), x.All())
	}
	g, err := b.Build()
	require.NoError(t, err)
	for _, streams := range []int{1, 2, 3} {
		p, err := planner.New(g, planner.Streams(streams))
		require.NoError(t, err)
		compute := map[dag.Priority]int{}
		other := 0
		for _, s := range p.Streams {
			if s.Kind == planner.Compute {
				compute[s.Priority]++
			} else {
				other++
			}
		}
		for prio, n := range compute {
			assert.LessOrEqual(t, n, streams, "streams %d, priority %s", streams, prio)
		}
		assert.Len(t, compute, 2, "one pool per priority")
		assert.Equal(t, 2, other, "an upload and a download stream beside them")
	}
}

// TestPriorityRange: priorities outside MinPriority..MaxPriority are
// refused at Build.
func TestPriorityRange(t *testing.T) {
	for _, p := range []dag.Priority{dag.MinPriority, dag.MaxPriority, dag.MinPriority - 1, 42} {
		b := dag.New()
		x := b.Array("x", dag.F32, 4, dag.Zeros())
		b.Fill(x.All(), 1, p, dag.Name("f"))
		_, err := b.Build()
		if p >= dag.MinPriority && p <= dag.MaxPriority {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, fmt.Sprintf(`op "f": priority %d is out of range`, p))
	}
}
