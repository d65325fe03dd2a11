package cpu_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// countdown counts an f32 n down to 0 in a loop, one iteration at a time.
func countdown(n int) func(b *dag.Builder) {
	return func(b *dag.Builder) {
		c := b.Buffer("n", 4, dag.Value(float64(n)))
		one := b.Buffer("one", 4, dag.Value(1))
		flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
		b.While(flag.All(), func(body *dag.Builder) {
			body.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), c, one, -1)
			body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), flag, c, 0.5)
		}, dag.Name("count"))
	}
}

// TestLoopQueuesStayBounded: a running loop's streams never empty, as
// each iteration queues the next before the last is done; their queues
// must still keep only the work pending, not every instruction the loop
// ever ran, or a long loop grows without bound.
func TestLoopQueuesStayBounded(t *testing.T) {
	const iterations = 20000
	p := plan(t, build(t, countdown(iterations)), 2)
	s, err := executor.Open(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Run(context.Background()))
	n, err := s.Read(p.Graph.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, f32Bytes(0), n, "the loop ran to the end")
	assert.Less(t, s.Device().(*cpu.Session).QueueCap(), 4096, "queued instructions kept after %d iterations", iterations)
}
