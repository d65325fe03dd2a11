//go:build cgo

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// graphCase is a graph whose captured replays are compared with eager runs.
type graphCase struct {
	name string
	g    *dag.Graph
	opts []planner.Option
}

// graphCases are the examples, the hazard graph and random graphs whose
// host memory is pinned (pageable copies cannot be captured).
func graphCases(t *testing.T) []graphCase {
	var cases []graphCase
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err, f)
		if !oneDeviceExample(s) {
			continue // ranks, several devices, or too large for the cpu oracle
		}
		cases = append(cases, graphCase{filepath.Base(f), s.Graph, runOptions(s)})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3 {
		cases = append(cases, graphCase{fmt.Sprintf("hazards%d", i), hazardGraph(rng), []planner.Option{planner.Streams(3)}})
	}
	cfgs := []dagtest.Config{
		{Ops: 120, Buffers: 8, Ranges: true, Priorities: true, After: true},
		{Ops: 200, Buffers: 10, Ranges: true, Temporaries: true},
		{Ops: 200, Buffers: 10, Ranges: true, Temporaries: true, HostBuffers: true, Priorities: true},
	}
	for ci, cfg := range cfgs {
		found := 0
		for seed := int64(0); found < 3 && seed < 50; seed++ {
			cfg.Seed = seed
			g := dagtest.Random(cfg)
			p, err := planner.New(g, planner.Streams(3))
			require.NoError(t, err)
			if executor.CheckCapture(p) != nil {
				continue // pageable copies
			}
			found++
			cases = append(cases, graphCase{fmt.Sprintf("random%d/seed%d", ci, seed), g, []planner.Option{planner.Streams(3)}})
		}
		require.Equal(t, 3, found, "config %d: too few random graphs without pageable copies", ci)
	}
	return cases
}

// eagerOnCPU runs p eagerly runs times on the cpu backend and returns the
// persistent buffers.
func eagerOnCPU(t *testing.T, p *planner.Plan, runs int) map[*dag.Buffer][]byte {
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	for range runs {
		require.NoError(t, s.Run(ctx))
	}
	return readAll(t, s, p.Graph)
}

func readAll(t *testing.T, s *executor.Session, g *dag.Graph) map[*dag.Buffer][]byte {
	out := map[*dag.Buffer][]byte{}
	for _, b := range g.Buffers {
		if !b.Temporary {
			data, err := s.Read(b)
			require.NoError(t, err)
			out[b] = data
		}
	}
	return out
}

func TestGraphReplayMatchesEager(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	const runs = 3
	for _, c := range graphCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p, err := planner.New(c.g, c.opts...)
			require.NoError(t, err)
			want := eagerOnCPU(t, p, runs)

			// Eager on the GPU as well, so a difference points at capture.
			s, err := executor.Open(ctx, b, p)
			require.NoError(t, err)
			for range runs {
				require.NoError(t, s.Run(ctx))
			}
			eager := readAll(t, s, c.g)
			require.NoError(t, s.Close())

			s, err = executor.Open(ctx, b, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			g, err := s.Capture(ctx)
			require.NoError(t, err)
			for range runs - 1 {
				require.NoError(t, g.Launch(ctx))
			}
			require.NoError(t, g.Run(ctx))
			got := readAll(t, s, c.g)
			for buf, w := range want {
				require.NoError(t, sameContents(buf, eager[buf], w, 1), "eager cuda against cpu")
				require.NoError(t, sameContents(buf, got[buf], w, 1), "%d replays against %d eager runs on cpu", runs, runs)
			}
			assert.Equal(t, runs, g.Stats().Launches)
			require.NoError(t, g.Close())
		})
	}
	assertReleased(t, b, "")
}

// updateGraph: in (pinned) -> x, x *= alpha, x += 1 * ones, x -> out
// (pinned), with a temporary on the way when tmp is set.
func updateGraph(n int64, tmp bool) (g *dag.Graph, inA, inB, out *dag.Buffer) {
	bld := dag.New()
	inA = bld.Buffer("in_a", 4*n, dag.PinnedHost(), dag.Of(dag.F32), dag.Random(1))
	inB = bld.Buffer("in_b", 4*n, dag.PinnedHost(), dag.Of(dag.F32), dag.Random(2))
	x := bld.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	ones := bld.Buffer("ones", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
	out = bld.Buffer("out", 4*n, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	bld.Copy(x.All(), inA.All(), dag.Name("upload"))
	bld.Launch(dag.Scale, dag.Grid1(8), dag.Grid1(128), x, float32(2), dag.Name("scale"))
	bld.Launch(dag.Axpy, dag.Grid1(8), dag.Grid1(128), x, ones, float32(1), dag.Name("offset"))
	if tmp {
		t := bld.Buffer("t", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Temporary())
		bld.Copy(t.All(), x.All(), dag.Name("stage"))
		bld.Copy(out.All(), t.All(), dag.Name("download"))
	} else {
		bld.Copy(out.All(), x.All(), dag.Name("download"))
	}
	g, err := bld.Build()
	if err != nil {
		panic(err)
	}
	return g, inA, inB, out
}

// affine is in * alpha + 1, rounded as the kernels round.
func affine(in []byte, alpha float32) []float32 {
	x := f32s(in)
	for i := range x {
		x[i] = float32(x[i]*alpha) + 1
	}
	return x
}

func TestGraphUpdate(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	for _, tmp := range []bool{false, true} {
		t.Run(fmt.Sprintf("temporary=%v", tmp), func(t *testing.T) {
			const n = 4096
			graph, inA, inB, out := updateGraph(n, tmp)
			p, err := planner.New(graph)
			require.NoError(t, err)
			s, err := executor.Open(ctx, b, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			g, err := s.Capture(ctx)
			require.NoError(t, err)
			check := func(in *dag.Buffer, alpha float32) {
				t.Helper()
				require.NoError(t, g.Run(ctx))
				src, err := s.Read(in)
				require.NoError(t, err)
				got, err := s.Read(out)
				require.NoError(t, err)
				assert.Equal(t, affine(src, alpha), f32s(got))
			}
			check(inA, 2)
			require.NoError(t, g.Update(ctx, executor.SetArg("scale", "alpha", 3)))
			check(inA, 3)
			require.NoError(t, g.Update(ctx, executor.Rebind(inA, inB)))
			check(inB, 3)
			batch := make([]byte, 4*n)
			putF32s(batch, affine(batch, 0)) // all ones
			require.NoError(t, s.Write(inB, batch))
			check(inB, 3)
			require.NoError(t, g.Update(ctx, executor.Rebind(inA, inA), executor.SetArg("scale", "alpha", -0.5)))
			check(inA, -0.5)
			st := g.Stats()
			t.Logf("graph stats %+v; session %+v", st, s.Device().(*Session).capt.stats())
			assert.Equal(t, 3, st.Updates)
			assert.Equal(t, 3, st.UpdatesInPlace+st.Reinstantiations)
			if !tmp {
				assert.Equal(t, 3, st.UpdatesInPlace, "kernel arguments and copy addresses update in place: %s", s.Device().(*Session).capt.stats().LastUpdateError)
			}
		})
	}
	assertReleased(t, b, "")
}

// TestGraphLeaks captures, updates, fails and cancels, leaving graphs for
// the session to close, and checks that the backend holds nothing after.
func TestGraphLeaks(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	graph, inA, inB, _ := updateGraph(1024, true)
	p, err := planner.New(graph)
	require.NoError(t, err)
	for round := range 3 {
		s, err := executor.Open(ctx, b, p)
		require.NoError(t, err)
		g1, err := s.Capture(ctx)
		require.NoError(t, err)
		g2, err := s.Capture(ctx)
		require.NoError(t, err)
		require.NoError(t, g1.Run(ctx))
		require.NoError(t, g2.Update(ctx, executor.Rebind(inA, inB)))
		require.NoError(t, g2.Launch(ctx))
		// Refused changes leave the graph as it was.
		require.Error(t, g1.Update(ctx, executor.SetArg("scale", "nope", 1)))
		require.Error(t, g1.Update(ctx, executor.SetArg("upload", "alpha", 1)))
		if round == 0 {
			require.NoError(t, g1.Close())
		}
		require.NoError(t, s.Close()) // closes what is left
		assertReleased(t, b, fmt.Sprintf("round %d", round))
	}

	// A host step failing inside a replay names its op.
	bld := dag.New()
	h := bld.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
	d := bld.Buffer("d", 64, dag.OnDevice(0), dag.Zeros())
	bld.Copy(d.All(), h.All())
	bld.Host(func(ctx context.Context, mem [][]byte) error { return errors.New("planned failure") }, dag.InOut(h.All()), dag.Name("check"))
	fg, err := bld.Build()
	require.NoError(t, err)
	fp, err := planner.New(fg)
	require.NoError(t, err)
	s, err := executor.Open(ctx, b, fp)
	require.NoError(t, err)
	g, err := s.Capture(ctx)
	require.NoError(t, err)
	err = g.Run(ctx)
	var oe *dag.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "check", oe.Op)
	require.NoError(t, s.Close())
	assertReleased(t, b, "")
}

// TestGraphNodes checks the shape of a captured plan: one kernel node per
// launch; forks, joins and the plan's waits are edges, not nodes.
func TestGraphNodes(t *testing.T) {
	b := gpuBackend(t)
	g := chains(4, 10, dag.Empty, 0, false)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	se := openSession(t, b, g)
	defer func() { require.NoError(t, se.Close()) }()
	for _, st := range p.Streams {
		require.NoError(t, se.sub.NewStream(st.Device, st.Priority))
	}
	for range p.Events {
		require.NoError(t, se.sub.NewEvent())
	}
	require.NoError(t, se.capt.BeginCapture(0))
	require.NoError(t, submit(se, p))
	gi, err := se.capt.EndCapture(0)
	require.NoError(t, err)
	n, err := se.capt.GraphNodes(gi)
	require.NoError(t, err)
	assert.Equal(t, len(g.Ops), n)
	require.NoError(t, se.capt.Instantiate(gi))
	require.NoError(t, se.capt.LaunchGraph(gi, 1))
	require.NoError(t, se.host.Sync(context.Background()))
	require.NoError(t, se.capt.DestroyGraph(gi))
	assert.Error(t, se.capt.LaunchGraph(gi, 0))
}

// oneDeviceExample reports whether example s is for this test: one rank,
// one device (a graph holds the work of one device), and at most 64 MiB
// of buffers, so that the cpu backend runs it in moments.
func oneDeviceExample(s *spec.Spec) bool {
	var bytes int64
	for _, b := range s.Graph.Buffers {
		if b.Placement == dag.Device && b.Device != 0 {
			return false
		}
		bytes += b.Size
	}
	return s.Run.World <= 1 && bytes <= 64<<20
}

// runOptions are the planner's options of spec s's run section.
func runOptions(s *spec.Spec) []planner.Option {
	opts := []planner.Option{planner.Streams(s.Run.Streams)}
	if s.Run.SharedCopyStreams {
		opts = append(opts, planner.SharedCopyStreams())
	}
	return opts
}
