package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// A new shape's first run plans the graph the spec makes at its values
// (spec.Spec.Shape, from what the first load kept): the plan is the one of
// the spec's text loaded afresh at those values, at every value.
func TestShapePlanAsLoaded(t *testing.T) {
	const file = "../examples/mlp_stream.yaml"
	s, err := spec.Load(file)
	require.NoError(t, err)
	opts := executor.Machine{SMs: 132}.Options()
	for _, T := range []int64{16, 512, 1024, 2048, 8192, 512} {
		g, err := s.Shape(context.Background(), map[string]int64{"T": T})
		require.NoError(t, err)
		fresh, err := spec.Load(file, spec.WithParam("T", T))
		require.NoError(t, err)
		require.Equal(t, fresh.Graph, g, "T=%d", T)
		got, err := planner.New(g, opts...)
		require.NoError(t, err)
		want, err := planner.New(fresh.Graph, opts...)
		require.NoError(t, err)
		require.Equal(t, want.Graph, got.Graph, "T=%d", T)
		require.Equal(t, want.Streams, got.Streams, "T=%d", T)
		require.Equal(t, want.Steps, got.Steps, "T=%d", T)
		require.Equal(t, want.OpStream, got.OpStream, "T=%d", T)
		require.Equal(t, want.Stats, got.Stats, "T=%d", T)
		require.Equal(t, want.Memory, got.Memory, "T=%d", T)
		require.Equal(t, want.Parts, got.Parts, "T=%d", T)
		require.Equal(t, want.Early, got.Early, "T=%d", T)
		for i := range want.Passes {
			require.Equal(t, want.Passes[i].Summary, got.Passes[i].Summary, "T=%d", T)
		}
	}
}
