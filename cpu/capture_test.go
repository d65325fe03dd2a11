package cpu_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
)

// TestCaptureProtocol drives the capture calls directly: recorded steps do
// not run until a launch, every launch replays them, a variant op replaces
// its original, and misuse is refused.
func TestCaptureProtocol(t *testing.T) {
	ctx := context.Background()
	var x, y *dag.Buffer
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 16, dag.OnDevice(0), dag.Value(1))
		y = b.Buffer("y", 16, dag.OnDevice(0), dag.Value(0))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(4), x, 2.0, dag.Name("double"))
		b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(4), y, x, 1.0, dag.Name("accumulate"))
	})
	be := openSession(t, cpu.New(), g)
	require.NoError(t, be.NewStream(0, dag.Normal))
	require.NoError(t, be.NewStream(0, dag.Normal))
	require.NoError(t, be.NewEvent())

	require.NoError(t, be.BeginCapture(0))
	assert.Error(t, be.BeginCapture(0), "one capture at a time")
	require.NoError(t, be.Run(0, g.Ops[0]))
	require.NoError(t, be.Record(0, 0))
	require.NoError(t, be.Wait(1, 0))
	require.NoError(t, be.Run(1, g.Ops[1]))
	_, err := be.EndCapture(1)
	assert.Error(t, err, "the capture began on stream 0")
	gi, err := be.EndCapture(0)
	require.NoError(t, err)
	require.NoError(t, be.Sync(ctx))
	read := func(b *dag.Buffer) []float32 {
		data, err := be.Read(b)
		require.NoError(t, err)
		return f32s(data)
	}
	assert.Equal(t, []float32{1, 1, 1, 1}, read(x), "captured work does not run")

	assert.ErrorContains(t, be.LaunchGraph(gi, 0), "not instantiated")
	require.NoError(t, be.Instantiate(gi))
	assert.ErrorContains(t, be.LaunchGraph(gi, 1), "replays on stream 0")
	for range 3 {
		require.NoError(t, be.LaunchGraph(gi, 0))
	}
	require.NoError(t, be.Sync(ctx))
	assert.Equal(t, []float32{8, 8, 8, 8}, read(x))
	assert.Equal(t, []float32{14, 14, 14, 14}, read(y), "2 + 4 + 8: each replay reads the x of its own")

	// A recapture with a variant of "double" (alpha 3) updates in place;
	// one with a step less does not.
	triple := *g.Ops[0]
	l := *triple.Launch
	l.Args = []dag.Arg{l.Args[0], {Access: -1, Float: 3}}
	triple.Launch = &l
	capture := func(first *dag.Op, rest bool) int {
		require.NoError(t, be.BeginCapture(0))
		require.NoError(t, be.Run(0, first))
		if rest {
			require.NoError(t, be.Record(0, 0))
			require.NoError(t, be.Wait(1, 0))
			require.NoError(t, be.Run(1, g.Ops[1]))
		}
		fresh, err := be.EndCapture(0)
		require.NoError(t, err)
		return fresh
	}
	inPlace, err := be.UpdateGraph(gi, capture(&triple, true))
	require.NoError(t, err)
	assert.True(t, inPlace)
	inPlace, err = be.UpdateGraph(gi, capture(&triple, false))
	require.NoError(t, err)
	assert.False(t, inPlace)
	require.NoError(t, be.Write(x, f32Bytes(1, 2, 3, 4)))
	require.NoError(t, be.LaunchGraph(gi, 0))
	require.NoError(t, be.Sync(ctx))
	assert.Equal(t, []float32{3, 6, 9, 12}, read(x))

	// Ops that are not variants of the graph's are refused.
	other := build(t, func(b *dag.Builder) {
		z := b.Buffer("z", 16, dag.OnDevice(0), dag.Zeros())
		b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(4), z, 0.0)
	})
	assert.ErrorContains(t, be.Run(0, other.Ops[0]), "nor a variant")
	fill := *g.Ops[0]
	fill.Kind = dag.Fill
	assert.ErrorContains(t, be.Run(0, &fill), "kind")

	assert.ErrorContains(t, be.Write(x, []byte{1}), "whole buffer")
	assert.ErrorContains(t, be.Write(other.Buffers[0], make([]byte, 16)), "not one of")
	graphs, events := be.Graphs()
	assert.Equal(t, 1, graphs)
	assert.Equal(t, 4, events, "a fork and a join event per stream")
	require.NoError(t, be.DestroyGraph(gi))
	assert.Error(t, be.DestroyGraph(gi))
	graphs, _ = be.Graphs()
	assert.Zero(t, graphs)
}
