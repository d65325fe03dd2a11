//go:build cgo

package cuda

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// TestPrepareHostGPU: host buffers made ahead of their session (executor.Open
// calls PrepareHost) hold their initial contents, pinned ones are pinned
// (copies from them run), and the results equal the cpu backend's; what
// was made for an Open that never came is freed by release and by Close.
func TestPrepareHostGPU(t *testing.T) {
	be := gpuBackend(t)
	ctx := context.Background()
	const n = 4 << 20
	bl := dag.New()
	in := bl.Buffer("in", n, dag.PinnedHost(), dag.Of(dag.F32), dag.Random(7))
	zero := bl.Buffer("zero", n, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	page := bl.Buffer("page", n/2, dag.PageableHost(), dag.Of(dag.F32), dag.Random(8))
	small := bl.Buffer("small", 4096, dag.PinnedHost(), dag.Of(dag.F32), dag.Random(9))
	d := bl.Buffer("d", n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	out := bl.Buffer("out", n, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	bl.Copy(d.All(), in.All())
	bl.Launch(dag.Axpy, dag.Grid1(256), dag.Grid1(256), d, d, 1.0)
	bl.Copy(out.All(), d.All())
	bl.Copy(d.Slice(0, n/2), page.All())
	bl.Copy(page.All(), d.Slice(n/4, n/2))
	g, err := bl.Build()
	require.NoError(t, err)
	p := mustPlan(t, g)

	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	// Open took what PrepareHost made: the big host buffers came filled
	// (pinned ones only where huge pages can be had), the small one not.
	bufs := s.Device().(*Session).hold.bufs
	assert.True(t, bufs[page.ID].filled, "page made ahead")
	assert.False(t, bufs[small.ID].filled, "small made at Open")
	for _, b := range []*dag.Buffer{in, zero, out} {
		assert.Equal(t, be.drv.hugeUsable(), bufs[b.ID].filled, "%s made ahead", b.Name)
	}
	if be.drv.hugeUsable() {
		be.drv.pins.mu.Lock()
		assert.Len(t, be.drv.pins.mapped, 3, "in, zero and out pinned from huge pages")
		be.drv.pins.mu.Unlock()
	}
	for _, b := range []*dag.Buffer{in, zero, page, small} {
		got, err := s.Read(b)
		require.NoError(t, err)
		assert.Equal(t, b.InitialBytes(), got, "initial contents of %s", b.Name)
	}
	require.NoError(t, s.Run(ctx))
	ref := cpu.New()
	defer ref.Close()
	rs, err := executor.Open(ctx, ref, p)
	require.NoError(t, err)
	require.NoError(t, rs.Run(ctx))
	for _, b := range []*dag.Buffer{out, page} {
		got, err := s.Read(b)
		require.NoError(t, err)
		want, err := rs.Read(b)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s after a run", b.Name)
	}
	require.NoError(t, rs.Close())
	require.NoError(t, s.Close())
	live := be.Live()
	assert.Zero(t, live.PinnedAllocs+live.HostAllocs+live.DeviceAllocs, "%+v", live)

	// Made ahead for Opens that never come: release frees one, Close the
	// other (gpuBackend's cleanup checks that nothing is held).
	be.PrepareHost(g)()
	be.PrepareHost(g)
}
