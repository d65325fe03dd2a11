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
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// pdlChain is a chain of small builtin kernels of several kinds on three
// buffers, every one reading what the one before it wrote: every launch
// after the first is one the planner launches early, and a launch that
// read too soon would change the results. Only kernels whose f32 results
// equal the CPU's bit for bit (no tanhf, expf or reductions), on values
// that stay bounded.
func pdlChain(t *testing.T, rounds int) (*dag.Graph, []*dag.Buffer) {
	t.Helper()
	const n = 10007 // not a multiple of any block size
	b := dag.New()
	x := b.Buffer("x", 4*n, dag.Of(dag.F32), dag.Random(1))
	y := b.Buffer("y", 4*n, dag.Of(dag.F32), dag.Random(2))
	z := b.Buffer("z", 4*n, dag.Of(dag.F32), dag.Zeros())
	grid, block := dag.Grid1(8), dag.Grid1(256)
	for range rounds {
		b.Launch(dag.Scale, grid, block, x, float32(0.5))
		b.Launch(dag.Axpy, grid, block, y, x, float32(-0.5))
		b.Launch(dag.Add, dag.Grid1(3), dag.Grid1(96), z, y, x)
		b.Launch(dag.Relu, grid, block, x, z)
	}
	g, err := b.Build()
	require.NoError(t, err)
	return g, []*dag.Buffer{x, y, z}
}

// runChain runs p on be three times, eagerly or as a captured graph
// replayed, and returns its buffers' bytes and the session's early
// launches.
func runChain(t *testing.T, be device.Backend, p *planner.Plan, bufs []*dag.Buffer, replay bool) ([][]byte, int, string) {
	t.Helper()
	ctx := context.Background()
	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	n, why := s.EarlyLaunches()
	if replay {
		graph, err := s.Capture(ctx)
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, graph.Run(ctx))
		}
	} else {
		for range 3 {
			require.NoError(t, s.Run(ctx))
		}
	}
	var out [][]byte
	for _, buf := range bufs {
		data, err := s.Read(buf)
		require.NoError(t, err)
		out = append(out, data)
	}
	return out, n, why
}

// Chains of builtin kernels launched early (programmatic dependent launch)
// give the cpu backend's results, eagerly and replayed from a graph with
// programmatic edges; on a device or driver without it the launches go
// plainly and the session says why.
func TestPDLChainMatchesCPU(t *testing.T) {
	be := gpuBackend(t)
	_, sms, err := be.DeviceInfo(0)
	require.NoError(t, err)
	unsupported, err := pdlSupport(be, 0)
	require.NoError(t, err)
	g, bufs := pdlChain(t, 40)
	for _, tc := range []struct {
		name   string
		mode   planner.Mode
		replay bool
	}{{"eager", planner.Eager, false}, {"replay", planner.Replay, true}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planner.New(g, planner.Streams(1), planner.SMs(sms), planner.ForMode(tc.mode), planner.Verify())
			require.NoError(t, err)
			require.Equal(t, len(g.Ops)-1, p.EarlyOps(), "every launch after the first")
			want, _, _ := runChain(t, cpu.New(), p, bufs, tc.replay)
			got, n, why := runChain(t, be, p, bufs, tc.replay)
			if unsupported == "" {
				assert.Equal(t, p.EarlyOps(), n)
				assert.Empty(t, why)
			} else {
				t.Logf("no early launches here: %s", why)
				assert.Zero(t, n)
				assert.Equal(t, unsupported, why)
			}
			for i, buf := range bufs {
				assert.Equal(t, want[i], got[i], "buffer %s", buf.Name)
			}
		})
	}
}

// A driver without programmatic dependent launch under capture (CUDA 12.2
// here, by the version the backend read) launches every kernel plainly and
// says why; the results are the same.
func TestPDLFallsBackWithAReason(t *testing.T) {
	be := gpuBackend(t)
	be.drv.version = 12020 // this backend's own driver record: no other test sees it
	g, bufs := pdlChain(t, 4)
	p, err := planner.New(g, planner.Streams(1), planner.Verify())
	require.NoError(t, err)
	require.Positive(t, p.EarlyOps())
	want, _, _ := runChain(t, cpu.New(), p, bufs, true)
	got, n, why := runChain(t, be, p, bufs, true)
	assert.Zero(t, n)
	assert.Contains(t, why, "(CUDA 12.2) does not capture programmatic dependent launches into graphs (CUDA 12.3 or newer)")
	assert.Equal(t, want, got)
}

// A launch marked early whose kernel does not wait for its producer (a
// user's kernel without early_launch) goes plainly, and LaunchEarly says
// why, whatever the plan says.
func TestPDLRefusesKernelsThatDoNotWait(t *testing.T) {
	be := gpuBackend(t)
	mine := &dag.Kernel{Name: "mine", Source: dag.CUDAC, Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.ReadWrite}},
		Code: `extern "C" __global__ void mine(float* x) { if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1.0f; }`}
	b := dag.New()
	x := b.Buffer("x", 1024, dag.Of(dag.F32), dag.Zeros())
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(256), x, float32(2))
	b.Launch(b.Kernel(mine), dag.Grid1(1), dag.Grid1(32), x)
	g, err := b.Build()
	require.NoError(t, err)
	s, err := be.Open(context.Background(), g)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	n, why := be.LaunchEarly(s, []bool{false, true})
	assert.Zero(t, n)
	assert.Contains(t, why, "is not a launch of a kernel that waits for its producer")
}
