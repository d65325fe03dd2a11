//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// shapesBench measures one program at several shapes (values, smallest
// first) on one backend: what one executor.Shapes holds against a session
// of the largest alone and sessions of their own, and what its runs cost
// against a session of the shape alone. Its measures take testing.TB so
// that TestShapesBenchCPU runs them on the cpu backend, where a mistake
// costs no GPU time.
type shapesBench struct {
	be     device.Backend
	build  executor.ShapeFunc
	values []map[string]int64
	rounds int // timed rounds of each measure, after one untimed
}

// shapesMemory is device memory, in bytes, measured from the free memory
// the backend reports before and after.
type shapesMemory struct {
	shapes   int64 // one Shapes holding every shape, captured and replayed
	largest  int64 // a session of the largest shape alone, captured and replayed
	separate int64 // a session of each shape, all open at once
}

// shapesTimes are the samples of one measure, by kind, shape by shape
// (the index of the shape in values).
type shapesTimes map[string][][]time.Duration

// add notes sample d of kind for shape (of n).
func (st shapesTimes) add(kind string, shape, n int, d time.Duration) {
	if st[kind] == nil {
		st[kind] = make([][]time.Duration, n)
	}
	st[kind][shape] = append(st[kind][shape], d)
}

// median is the median of kind's samples of the shape.
func (st shapesTimes) median(kind string, shape int) time.Duration {
	return median(st[kind][shape])
}

// shapeLabel names values in metric units: "T512".
func shapeLabel(values map[string]int64) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(values)) {
		fmt.Fprintf(&b, "%s%d", name, values[name])
	}
	return b.String()
}

// shapesOrder is round r's order of the n shapes: rotated by r, so that each
// shape follows each other, while two runs in a row are always of
// different shapes (with two shapes a rotation would repeat one at the
// rounds' boundary, so they keep one order).
func shapesOrder(r, n int) []int {
	rot := 0
	if n >= 3 {
		rot = r % n
	}
	out := make([]int, n)
	for j := range out {
		out[j] = (rot + j) % n
	}
	return out
}

// shapesTimed runs f once and returns how long it took.
func shapesTimed(tb testing.TB, f func() error) time.Duration {
	tb.Helper()
	start := time.Now()
	require.NoError(tb, f())
	return time.Since(start)
}

// plan plans g as a Shapes does by default: planner.New with what the
// backend knows of the machine.
func (sb *shapesBench) plan(tb testing.TB, g *dag.Graph) *planner.Plan {
	tb.Helper()
	m, err := executor.MachineOf(sb.be, g)
	require.NoError(tb, err)
	p, err := planner.New(g, m.Options()...)
	require.NoError(tb, err)
	return p
}

// planShape makes and plans the graph of values.
func (sb *shapesBench) planShape(tb testing.TB, ctx context.Context, values map[string]int64) *planner.Plan {
	tb.Helper()
	g, err := sb.build(ctx, maps.Clone(values))
	require.NoError(tb, err)
	return sb.plan(tb, g)
}

// open opens a session of its own for values; the caller closes it.
func (sb *shapesBench) open(tb testing.TB, ctx context.Context, values map[string]int64) *executor.Session {
	tb.Helper()
	s, err := executor.Open(ctx, sb.be, sb.planShape(tb, ctx, values))
	require.NoError(tb, err)
	return s
}

// openShapes opens a Shapes of the program with opts; the caller closes it.
func (sb *shapesBench) openShapes(tb testing.TB, ctx context.Context, opts ...executor.Option) *executor.Shapes {
	tb.Helper()
	sh, err := executor.OpenShapes(ctx, sb.be, sb.build, opts...)
	require.NoError(tb, err)
	return sh
}

// shapesRun runs values on sh and checks that it ran as opened says: a replay of
// a shape kept, or a shape opened and captured for the run.
func shapesRun(ctx context.Context, sh *executor.Shapes, values map[string]int64, opened bool) error {
	sr, err := sh.Run(ctx, values)
	if err != nil {
		return err
	}
	return shapesRanAs(sr, opened)
}

// shapesRanAs checks that sr ran as opened says (shapesRun): a shape
// opened for the run runs eagerly while its graph is captured, a shape
// kept replays its graph.
func shapesRanAs(sr *executor.ShapeRun, opened bool) error {
	values := sr.Values
	if sr.Replayed == opened || sr.Opened != opened || sr.Captured != opened {
		return fmt.Errorf("%s: replayed %v, opened %v, captured %v; want %s",
			spec.FormatValues(values), sr.Replayed, sr.Opened, sr.Captured,
			map[bool]string{true: "an eager run of a shape opened and captured for it", false: "a replay of a shape kept"}[opened])
	}
	return nil
}

// memory measures device 0's memory: a session of the largest shape alone,
// one of each shape all open at once, and one Shapes of them all (its
// buckets, captured when it opens), each captured and replayed once, and
// each measured from everything closed. The first session loaded the
// modules and libraries, which the backend keeps: none of these counts
// them.
func (sb *shapesBench) memory(tb testing.TB, ctx context.Context) shapesMemory {
	tb.Helper()
	mem, ok := sb.be.(device.Memory)
	require.True(tb, ok, "backend %T cannot tell its free memory", sb.be)
	free := func() int64 {
		f, _, err := mem.FreeMemory(0)
		require.NoError(tb, err)
		return f
	}
	replay := func(s *executor.Session) {
		g, err := s.Capture(ctx)
		require.NoError(tb, err)
		require.NoError(tb, g.Run(ctx))
	}
	var m shapesMemory
	before := free()
	alone := sb.open(tb, ctx, sb.values[len(sb.values)-1])
	replay(alone)
	m.largest = before - free()
	require.NoError(tb, alone.Close())

	before = free()
	var own []*executor.Session
	for _, v := range sb.values {
		s := sb.open(tb, ctx, v)
		replay(s)
		own = append(own, s)
	}
	m.separate = before - free()
	for _, s := range own {
		require.NoError(tb, s.Close())
	}

	before = free()
	sh := sb.openShapes(tb, ctx, executor.WithBuckets(sb.values...), executor.WithKeep(len(sb.values)))
	for _, v := range sb.values {
		require.NoError(tb, shapesRun(ctx, sh, v, false))
	}
	m.shapes = before - free()
	_, shared, why := sh.Memory()
	require.True(tb, shared, why)
	require.NoError(tb, sh.Close())
	return m
}

// switching times replays of sh's shapes, kept: "switch" a replay right
// after one of another shape, "steady" the replay right after it, of the
// same shape.
func (sb *shapesBench) switching(tb testing.TB, ctx context.Context, sh *executor.Shapes, st shapesTimes) {
	tb.Helper()
	n := len(sb.values)
	for r := range sb.rounds + 1 {
		for _, i := range shapesOrder(r, n) {
			v := sb.values[i]
			sw := shapesTimed(tb, func() error { return shapesRun(ctx, sh, v, false) })
			steady := shapesTimed(tb, func() error { return shapesRun(ctx, sh, v, false) })
			if r > 0 { // the first round warms up
				st.add("switch", i, n, sw)
				st.add("steady", i, n, steady)
			}
		}
	}
}

// first times the first run of each shape on the Shapes of firsts (by
// kind), each of which keeps one shape and whose memory already covers
// every shape, so that each run opens and captures its shape anew (and
// closes the one before, kept no longer). "first" is a Shapes that keeps
// its plans, so a shape that returns is not built and planned again;
// "firstnew" keeps none (executor.WithPlansKept(0)), each shape built and
// planned as if never seen. Each kind's parts are noted as the run reports
// them (ShapeRun.Took: kind+"-build", "-plan", "-drop", "-open",
// "-capture", "-instantiate", which overlap the run, and the rest,
// "-replay").
// Beside them, in turn in the same rounds (what the device gives drifts
// over a block of runs of one kind): an eager run ("eager") and a capture
// ("capture", the graph closed untimed) of the shape's own session in own,
// and the making and planning of its graph ("plan", which a new shape's
// first run does too).
func (sb *shapesBench) first(tb testing.TB, ctx context.Context, firsts map[string]*executor.Shapes, own []*executor.Session, st shapesTimes) {
	tb.Helper()
	n := len(sb.values)
	took := map[string]executor.OpenTimes{} // by kind, the last first run's
	firstOf := func(kind string) func(i int) (string, time.Duration) {
		return func(i int) (string, time.Duration) {
			return kind, shapesTimed(tb, func() error {
				sr, err := firsts[kind].Run(ctx, sb.values[i])
				if err == nil {
					took[kind] = sr.Took
					err = shapesRanAs(sr, true)
				}
				return err
			})
		}
	}
	var kinds []func(i int) (string, time.Duration)
	for _, kind := range slices.Sorted(maps.Keys(firsts)) {
		kinds = append(kinds, firstOf(kind))
	}
	kinds = append(kinds,
		func(i int) (string, time.Duration) {
			return "eager", shapesTimed(tb, func() error { return own[i].Run(ctx) })
		},
		func(i int) (string, time.Duration) {
			var g *executor.Graph
			d := shapesTimed(tb, func() (err error) {
				g, err = own[i].Capture(ctx)
				return err
			})
			require.NoError(tb, g.Close())
			return "capture", d
		},
		func(i int) (string, time.Duration) {
			return "plan", shapesTimed(tb, func() error {
				sb.planShape(tb, ctx, sb.values[i])
				return nil
			})
		},
	)
	for r := range sb.rounds + 1 {
		for _, i := range shapesOrder(r, n) {
			for j := range kinds {
				k, d := kinds[(r+j)%len(kinds)](i)
				if r == 0 {
					continue
				}
				st.add(k, i, n, d)
				if t, ok := took[k]; ok && firsts[k] != nil {
					parts := map[string]time.Duration{"build": t.Build, "plan": t.Plan, "drop": t.Drop,
						"open": t.Open, "capture": t.Capture, "instantiate": t.Instantiate}
					rest := d
					for part, pd := range parts {
						st.add(k+"-"+part, i, n, pd)
						rest -= pd
					}
					st.add(k+"-replay", i, n, rest)
				}
			}
		}
	}
}

// fresh times the first run of each shape on a Shapes of its own, just
// opened without buckets: its memory allocated (and loaded with the
// initial contents), the shape planned, opened, captured and replayed
// ("fresh"). Beside it, in turn, what a session of the shape alone takes
// from its graph to a captured graph: planning ("plan"), Open ("open",
// memory and initial contents too), its first eager run ("eager") and a
// capture ("capture"). Each is closed untimed.
func (sb *shapesBench) fresh(tb testing.TB, ctx context.Context, st shapesTimes) {
	tb.Helper()
	n := len(sb.values)
	for r := range sb.rounds + 1 {
		for _, i := range shapesOrder(r, n) {
			v := sb.values[i]
			var sh *executor.Shapes
			fresh := shapesTimed(tb, func() error {
				sh = sb.openShapes(tb, ctx)
				return shapesRun(ctx, sh, v, true)
			})
			require.NoError(tb, sh.Close())

			var p *planner.Plan
			plan := shapesTimed(tb, func() error {
				p = sb.planShape(tb, ctx, v)
				return nil
			})
			var s *executor.Session
			open := shapesTimed(tb, func() (err error) {
				s, err = executor.Open(ctx, sb.be, p)
				return err
			})
			eager := shapesTimed(tb, func() error { return s.Run(ctx) })
			capture := shapesTimed(tb, func() error {
				_, err := s.Capture(ctx)
				return err
			})
			require.NoError(tb, s.Close())
			if r > 0 {
				st.add("fresh", i, n, fresh)
				st.add("cold", i, n, plan+open+eager+capture)
				st.add("open", i, n, open)
			}
		}
	}
}

// BenchmarkShapes measures the statements of one Shapes serving
// examples/mlp_stream.yaml at T = 512, 2048 and 8192, each against what
// a session of its own does in the same run:
//   - memory: device memory of one Shapes holding the three shapes,
//     captured and replayed, at most 1.1x that of the largest shape alone;
//     three sessions of their own beside them;
//   - switch: a replay of a shape right after one of another shape, at
//     most 1.05x a replay right after one of the same shape;
//   - first: the first run of a shape not kept, where the Shapes' memory
//     already holds it (it plans, opens and captures the shape, and closes
//     the one kept before), at most an eager run of the shape plus a
//     capture (sessions of their own, open beside it);
//   - fresh: the first run on a Shapes just opened, its memory allocated
//     too, against a session of the shape alone planned, opened, run
//     eagerly once and captured.
//
// Medians of the rounds, the kinds and shapes run in turn: these GEMMs
// hold the device at its power limit, and what it gives drifts over a
// block of runs of one kind. scripts/gpu/shapes.sh runs it with
// -test.benchtime 1x and tabulates it beside PyTorch's figures.
func BenchmarkShapes(b *testing.B) {
	be := gpuBackend(b, CacheDir(b.TempDir()))
	ctx := context.Background()
	s, err := spec.Load("../examples/mlp_stream.yaml")
	require.NoError(b, err)
	// Modules and cuBLASLt load once per backend: before any measure.
	warm, err := s.At(map[string]int64{"T": 16})
	require.NoError(b, err)
	sb := &shapesBench{be: be, build: s.Shape, values: []map[string]int64{{"T": 512}, {"T": 2048}, {"T": 8192}}, rounds: 11}
	_, err = executor.Execute(ctx, be, sb.plan(b, warm.Graph))
	if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
		b.Skipf("no cuBLASLt: %v", err)
	}
	require.NoError(b, err)
	benchShapes(b, ctx, sb, 5)
}

// benchShapes runs sb's measures as sub-benchmarks and reports them; the
// fresh measure, which allocates the memory of each shape twice a round,
// runs freshRounds rounds.
func benchShapes(b *testing.B, ctx context.Context, sb *shapesBench, freshRounds int) {
	const mib = 1 << 20
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.Run("memory", func(b *testing.B) {
		var m shapesMemory
		for range b.N {
			m = sb.memory(b, ctx)
		}
		b.ReportMetric(float64(m.shapes)/mib, "shapes-MiB")
		b.ReportMetric(float64(m.largest)/mib, "largest-MiB")
		b.ReportMetric(float64(m.separate)/mib, "separate-MiB")
		b.ReportMetric(float64(m.shapes)/float64(m.largest), "shapes/largest")
		b.ReportMetric(float64(m.separate)/float64(m.largest), "separate/largest")
	})
	b.Run("switch", func(b *testing.B) {
		sh := sb.openShapes(b, ctx, executor.WithBuckets(sb.values...), executor.WithKeep(len(sb.values)))
		b.Cleanup(func() { require.NoError(b, sh.Close()) })
		st := shapesTimes{}
		for range b.N {
			sb.switching(b, ctx, sh, st)
		}
		for i, v := range sb.values {
			l := shapeLabel(v)
			steady, sw := st.median("steady", i), st.median("switch", i)
			b.ReportMetric(ms(steady), l+"-steady-ms")
			b.ReportMetric(ms(sw), l+"-switch-ms")
			b.ReportMetric(float64(sw)/float64(steady), l+"-switch/steady")
		}
	})
	b.Run("first", func(b *testing.B) {
		var own []*executor.Session
		for _, v := range sb.values {
			s := sb.open(b, ctx, v)
			b.Cleanup(func() { require.NoError(b, s.Close()) })
			own = append(own, s)
		}
		sh := sb.openShapes(b, ctx, executor.WithKeep(1))
		b.Cleanup(func() { require.NoError(b, sh.Close()) })
		// The largest first: the memory then holds every shape, and no
		// first run below allocates it again.
		require.NoError(b, shapesRun(ctx, sh, sb.values[len(sb.values)-1], true))
		// Shapes never seen: a Shapes that keeps no plan, its memory
		// covering every shape too.
		fresh := sb.openShapes(b, ctx, executor.WithKeep(1), executor.WithPlansKept(0))
		b.Cleanup(func() { require.NoError(b, fresh.Close()) })
		require.NoError(b, shapesRun(ctx, fresh, sb.values[len(sb.values)-1], true))
		st := shapesTimes{}
		for range b.N {
			sb.first(b, ctx, map[string]*executor.Shapes{"first": sh, "firstnew": fresh}, own, st)
		}
		for i, v := range sb.values {
			l := shapeLabel(v)
			eager, capture := st.median("eager", i), st.median("capture", i)
			b.ReportMetric(ms(eager), l+"-eager-ms")
			b.ReportMetric(ms(capture), l+"-capture-ms")
			b.ReportMetric(ms(st.median("plan", i)), l+"-plan-ms")
			for _, kind := range []string{"first", "firstnew"} {
				first := st.median(kind, i)
				b.ReportMetric(ms(first), l+"-"+kind+"-ms")
				for _, part := range []string{"build", "plan", "drop", "open", "capture", "instantiate", "replay"} {
					b.ReportMetric(ms(st.median(kind+"-"+part, i)), l+"-"+kind+"-"+part+"-ms")
				}
				b.ReportMetric(float64(first)/float64(eager+capture), l+"-"+kind+"/eager+capture")
			}
		}
	})
	b.Run("fresh", func(b *testing.B) {
		fb := *sb
		fb.rounds = freshRounds
		st := shapesTimes{}
		for range b.N {
			fb.fresh(b, ctx, st)
		}
		for i, v := range sb.values {
			l := shapeLabel(v)
			fresh, cold := st.median("fresh", i), st.median("cold", i)
			b.ReportMetric(ms(fresh), l+"-fresh-ms")
			b.ReportMetric(ms(cold), l+"-cold-ms")
			b.ReportMetric(ms(st.median("open", i)), l+"-open-ms")
			b.ReportMetric(float64(fresh)/float64(cold), l+"-fresh/cold")
		}
	})
}

// TestShapesBenchCPU runs BenchmarkShapes' measures on the cpu backend
// with a small MLP block (shapesMLP), so that a mistake in them shows here
// rather than on the GPU machine: every run replays or captures as the
// measure expects, and each figure is there.
func TestShapesBenchCPU(t *testing.T) {
	ctx := context.Background()
	s, err := spec.Parse("shapes_mlp.yaml", []byte(shapesMLP))
	require.NoError(t, err)
	be := cpu.New()
	defer be.Close()
	sb := &shapesBench{be: be, build: s.Shape, values: []map[string]int64{{"T": 16}, {"T": 64}, {"T": 256}}, rounds: 2}
	m := sb.memory(t, ctx)
	t.Logf("memory (host, noisy): %+v", m)

	sh := sb.openShapes(t, ctx, executor.WithBuckets(sb.values...), executor.WithKeep(len(sb.values)))
	st := shapesTimes{}
	sb.switching(t, ctx, sh, st)
	require.NoError(t, sh.Close())

	var own []*executor.Session
	for _, v := range sb.values {
		own = append(own, sb.open(t, ctx, v))
	}
	sh = sb.openShapes(t, ctx, executor.WithKeep(1))
	require.NoError(t, shapesRun(ctx, sh, sb.values[len(sb.values)-1], true))
	fresh := sb.openShapes(t, ctx, executor.WithKeep(1), executor.WithPlansKept(0))
	require.NoError(t, shapesRun(ctx, fresh, sb.values[len(sb.values)-1], true))
	sb.first(t, ctx, map[string]*executor.Shapes{"first": sh, "firstnew": fresh}, own, st)
	require.NoError(t, sh.Close())
	require.NoError(t, fresh.Close())
	for _, s := range own {
		require.NoError(t, s.Close())
	}
	sb.fresh(t, ctx, st)

	for i := range sb.values {
		require.Zero(t, st.median("first-build", i)+st.median("first-plan", i), "a shape that returns keeps its plan")
	}
	for _, kind := range []string{"switch", "steady", "first", "eager", "capture", "plan", "fresh", "cold", "open",
		"first-drop", "first-open", "first-capture", "first-replay",
		"firstnew", "firstnew-build", "firstnew-plan", "firstnew-drop", "firstnew-open", "firstnew-capture", "firstnew-replay"} {
		require.Len(t, st[kind], len(sb.values), kind)
		for i := range sb.values {
			require.Len(t, st[kind][i], sb.rounds, "%s of %s", kind, shapeLabel(sb.values[i]))
			require.Positive(t, st.median(kind, i), "%s of %s", kind, shapeLabel(sb.values[i]))
		}
	}
	require.Equal(t, []int{0, 1}, shapesOrder(1, 2), "two shapes keep one order")
	require.Equal(t, []int{2, 0, 1}, shapesOrder(2, 3))
}
