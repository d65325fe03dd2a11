//go:build cgo

package cuda

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
)

// streamHandles are the driver streams of an executor session of this
// backend.
func streamHandles(t *testing.T, s *executor.Session) map[uintptr]bool {
	t.Helper()
	se, ok := s.Device().(*Session)
	require.True(t, ok)
	out := map[uintptr]bool{}
	for _, st := range se.sub.streams {
		out[uintptr(unsafe.Pointer(st.h))] = true
	}
	return out
}

// A session closed cleanly leaves its streams and events to the next
// session of its backend: the next one of the same plan runs on the same
// streams, and equals the CPU backend. Sessions open side by side never
// share a stream. Backend.Close destroys what is kept (gpuBackend's
// cleanup checks that nothing is left).
func TestRecycledStreamsGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	ex := examplePlans(t)[0]
	onCPU, err := executor.Open(ctx, cpu.New(), ex.p)
	require.NoError(t, err)
	defer onCPU.Close()
	require.NoError(t, onCPU.Run(ctx))
	check := func(s *executor.Session, what string) {
		t.Helper()
		require.NoError(t, s.Run(ctx), what)
		for _, buf := range ex.p.Graph.Buffers {
			if buf.Temporary {
				continue
			}
			got, err := s.Read(buf)
			require.NoError(t, err)
			want, err := onCPU.Read(buf)
			require.NoError(t, err)
			assert.NoError(t, sameContents(buf, got, want, 1), "%s: %s", what, buf.Name)
		}
	}

	first, err := executor.Open(ctx, b, ex.p)
	require.NoError(t, err)
	check(first, "the first session")
	made := streamHandles(t, first)
	require.NotEmpty(t, made)
	require.NoError(t, first.Close())
	kept := b.Live().Kept
	assert.GreaterOrEqual(t, kept, len(made), "the closed session's streams (and events) are kept")

	again, err := executor.Open(ctx, b, ex.p)
	require.NoError(t, err)
	assert.Equal(t, made, streamHandles(t, again), "the next session of the plan runs on the streams kept")
	beside, err := executor.Open(ctx, b, ex.p)
	require.NoError(t, err)
	for h := range streamHandles(t, beside) {
		assert.False(t, made[h], "a session beside another gets streams of its own")
	}
	check(again, "a session on streams kept")
	check(beside, "a session beside it")
	require.NoError(t, again.Close())
	require.NoError(t, beside.Close())
	assertReleased(t, b, "after sessions on kept streams")
	assert.Positive(t, b.Live().Kept)
}
