package cpu_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// hostWorkLoop is a loop whose body copies to host memory, decides on the
// host and copies the flag back: what a CUDA conditional node cannot hold.
func hostWorkLoop(t *testing.T) (g *dag.Graph, x *dag.Buffer, passes *int) {
	t.Helper()
	passes = new(int)
	b := dag.New()
	x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	h := b.Buffer("h", 4*4, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	hflag := b.Buffer("hflag", 4, dag.PinnedHost(), dag.Of(dag.I32), dag.Zeros())
	flag := b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1)
	b.Fill(flag.All(), 1)
	b.While(flag.All(), func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(4), x, float32(0.5))
		body.Copy(h.All(), x.All())
		body.Host(func(_ context.Context, mem [][]byte) error {
			*passes++
			var set uint32
			if math.Float32frombits(binary.LittleEndian.Uint32(mem[0])) > 0.2 {
				set = 1
			}
			binary.LittleEndian.PutUint32(mem[1], set)
			return nil
		}, dag.In(h.All()), dag.Out(hflag.All()))
		body.Copy(flag.All(), hflag.All())
	}, dag.AtMost(10))
	g, err := b.Build()
	require.NoError(t, err)
	return g, x, passes
}

// TestLoopBodyHostWork: the cpu backend runs host steps and copies to and
// from host memory in a loop's body, eagerly and replayed.
func TestLoopBodyHostWork(t *testing.T) {
	g, x, passes := hostWorkLoop(t)
	p, err := planner.New(g)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Run(ctx))
	assert.Equal(t, 3, *passes, "x halves to 0.5, 0.25, 0.125")
	got, err := s.Read(x)
	require.NoError(t, err)
	assert.Equal(t, dag.ElemBytes(dag.F32, 0.125), got[:4])

	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, gr.Run(ctx))
	assert.Equal(t, 6, *passes, "a replay runs the host step in every pass again")
	got, err = s.Read(x)
	require.NoError(t, err)
	assert.Equal(t, dag.ElemBytes(dag.F32, 0.125), got[:4])
}
