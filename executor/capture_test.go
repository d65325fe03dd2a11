package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

type captureCase struct {
	name string
	g    *dag.Graph
	opts []planner.Option
}

// captureCases are the examples, the dagtest fixtures and random graphs
// that a graph can hold (no pageable copies, one device).
func captureCases(t *testing.T) []captureCase {
	var cases []captureCase
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err, f)
		if !oneDeviceExample(s) {
			continue // ranks, several devices, or too large for the cpu oracle
		}
		cases = append(cases, captureCase{filepath.Base(f), s.Graph, runOptions(s)})
	}
	for _, f := range dagtest.Fixtures() {
		cases = append(cases, captureCase{"fixture/" + f.Name, f.Graph, []planner.Option{planner.Streams(3)}})
	}
	cfgs := []dagtest.Config{
		{Ops: 60, Buffers: 4},
		{Ops: 120, Buffers: 8, Ranges: true, Priorities: true, After: true},
		{Ops: 150, Buffers: 10, Ranges: true, Temporaries: true},
		{Ops: 150, Buffers: 10, Ranges: true, Temporaries: true, HostBuffers: true, Priorities: true, After: true},
		{Ops: 120, Buffers: 8, Ranges: true, Temporaries: true, HostBuffers: true, Memset2D: true},
	}
	for ci, cfg := range cfgs {
		found := 0
		for seed := int64(0); found < 4 && seed < 60; seed++ {
			cfg.Seed = seed
			g := dagtest.Random(cfg)
			opts := []planner.Option{planner.Streams(1 + int(seed%4))}
			p, err := planner.New(g, opts...)
			require.NoError(t, err)
			if executor.CheckCapture(p) != nil {
				continue // pageable copies: checked in TestCaptureRefuses
			}
			found++
			cases = append(cases, captureCase{fmt.Sprintf("random%d/seed%d", ci, seed), g, opts})
		}
		require.Equal(t, 4, found, "config %d: too few random graphs without pageable copies", ci)
	}
	return cases
}

func readAll(t *testing.T, s *executor.Session, g *dag.Graph) map[*dag.Buffer][]byte {
	t.Helper()
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

// TestCaptureMatchesEager: n replays of a captured plan leave every
// persistent buffer as n eager runs do, with random pauses shaking the
// order of the work.
func TestCaptureMatchesEager(t *testing.T) {
	ctx := context.Background()
	for i, c := range captureCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p, err := planner.New(c.g, c.opts...)
			require.NoError(t, err)
			runs := 1 + i%3
			eager, err := executor.Open(ctx, cpu.New(cpu.Delays(int64(i), 20*time.Microsecond)), p)
			require.NoError(t, err)
			for range runs {
				require.NoError(t, eager.Run(ctx))
			}
			want := readAll(t, eager, c.g)
			require.NoError(t, eager.Close())

			be := cpu.New(cpu.Delays(int64(i+1), 20*time.Microsecond))
			s, err := executor.Open(ctx, be, p)
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
				require.Equal(t, w, got[buf], "buffer %s after %d replays and %d eager runs", buf.Name, runs, runs)
			}
			assert.Equal(t, runs, g.Stats().Launches)
			require.NoError(t, g.Close())
			graphs, _ := s.Device().(*cpu.Session).Graphs()
			assert.Zero(t, graphs)
		})
	}
}

// pipeline: in (pinned) -> x, x *= alpha, x += ones, x -> out (pinned),
// through a temporary.
type pipeline struct {
	g                    *dag.Graph
	inA, inB, spare, out *dag.Buffer
	scale                *dag.Op
}

func newPipeline(t *testing.T, n int64) pipeline {
	b := dag.New()
	var p pipeline
	p.inA = b.Buffer("in_a", 4*n, dag.PinnedHost(), dag.Random(1))
	p.inB = b.Buffer("in_b", 4*n, dag.PinnedHost(), dag.Random(2))
	p.spare = b.Buffer("spare", 4*n+4, dag.PinnedHost(), dag.Zeros())
	x := b.Buffer("x", 4*n, dag.OnDevice(0), dag.Zeros())
	tmp := b.Buffer("tmp", 4*n, dag.OnDevice(0), dag.Temporary())
	ones := b.Buffer("ones", 4*n, dag.OnDevice(0), dag.Value(1))
	p.out = b.Buffer("out", 4*n, dag.PinnedHost(), dag.Zeros())
	b.Copy(x.All(), p.inA.All(), dag.Name("upload"))
	p.scale = b.Launch(dag.Scale, dag.Grid1(4), dag.Grid1(64), x, 2.0, dag.Name("scale"))
	b.Launch(dag.Axpy, dag.Grid1(4), dag.Grid1(64), x, ones, 1.0, dag.Name("offset"))
	b.Copy(tmp.All(), x.All(), dag.Name("stage"))
	b.Copy(p.out.All(), tmp.All(), dag.Name("download"))
	g, err := b.Build()
	require.NoError(t, err)
	p.g = g
	return p
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// affine is in * alpha + 1, each step rounded to f32 as the kernels do.
func affine(in []byte, alpha float32) []float32 {
	x := f32s(in)
	for i := range x {
		x[i] = float32(x[i]*alpha) + 1
	}
	return x
}

func TestCaptureUpdate(t *testing.T) {
	ctx := context.Background()
	const n = 256
	pl := newPipeline(t, n)
	p, err := planner.New(pl.g)
	require.NoError(t, err)
	be := cpu.New()
	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer s.Close()
	g, err := s.Capture(ctx)
	require.NoError(t, err)
	check := func(in *dag.Buffer, alpha float32) {
		t.Helper()
		require.NoError(t, g.Run(ctx))
		src, err := s.Read(in)
		require.NoError(t, err)
		got, err := s.Read(pl.out)
		require.NoError(t, err)
		require.Equal(t, affine(src, alpha), f32s(got))
	}
	check(pl.inA, 2)
	require.NoError(t, g.Update(ctx, executor.SetArg(pl.scale, "alpha", 3)))
	check(pl.inA, 3)
	require.NoError(t, g.Update(ctx, executor.Rebind(pl.inA, pl.inB)))
	check(pl.inB, 3)
	batch := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(batch[4*i:], math.Float32bits(float32(i)))
	}
	require.NoError(t, s.Write(pl.inB, batch))
	check(pl.inB, 3)
	require.NoError(t, g.Update(ctx, executor.SetArg("scale", "alpha", 3))) // no change: no recapture
	require.NoError(t, g.Update(ctx, executor.Rebind(pl.inA, pl.inA), executor.SetArg("scale", "alpha", -0.5)))
	check(pl.inA, -0.5)
	// Eager runs of the session still run the plan as it was made.
	require.NoError(t, s.Run(ctx))
	src, err := s.Read(pl.inA)
	require.NoError(t, err)
	got, err := s.Read(pl.out)
	require.NoError(t, err)
	assert.Equal(t, affine(src, 2), f32s(got))

	st := g.Stats()
	assert.Equal(t, 3, st.Updates)
	assert.Equal(t, 3, st.UpdatesInPlace, "the cpu backend updates same-shaped captures in place")
	assert.Zero(t, st.Reinstantiations)
	assert.Equal(t, 5, st.Launches)
	assert.Positive(t, st.Capture)
	assert.Positive(t, st.UpdateTime)
}

// refuses is a backend whose sessions cannot capture.
type refuses struct{ *cpu.Backend }

func (r refuses) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := r.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return struct{ device.Session }{s}, nil
}

// failing is a backend whose sessions fail the Run of one op, to test a
// capture that breaks midway.
type failing struct {
	*cpu.Backend
	op   string
	last *cpu.Session
}

func (f *failing) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := f.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	f.last = s
	return failingSession{s, f.op}, nil
}

type failingSession struct {
	*cpu.Session
	op string
}

func (f failingSession) Run(stream int, op *dag.Op) error {
	if op.Name == f.op {
		return errors.New("planned failure")
	}
	return f.Session.Run(stream, op)
}

func TestCaptureRefuses(t *testing.T) {
	ctx := context.Background()
	b := dag.New()
	pageable := b.Buffer("pageable", 64, dag.PageableHost(), dag.Zeros())
	d0 := b.Buffer("d0", 64, dag.OnDevice(0), dag.Zeros())
	d1 := b.Buffer("d1", 64, dag.OnDevice(1), dag.Zeros())
	b.Copy(d0.All(), pageable.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(16), d1, 2.0, dag.Name("far"), dag.OnDevice(1))
	b.Copy(pageable.All(), d0.All(), dag.Name("download"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Capture(ctx)
	require.Error(t, err)
	byOp := map[string]*dag.Error{}
	for _, e := range dag.Errors(err) {
		byOp[e.Op] = e
	}
	require.Len(t, byOp, 2, "%v", err)
	assert.Contains(t, byOp["upload"].Hint, "use pinned memory")
	assert.Contains(t, byOp["download"].Hint, "use pinned memory")
	assert.NotContains(t, byOp, "far", "work on another device is captured in the same graph")

	// A backend that cannot capture says so.
	pl := newPipeline(t, 16)
	pp, err := planner.New(pl.g)
	require.NoError(t, err)
	rs, err := executor.Open(ctx, refuses{cpu.New()}, pp)
	require.NoError(t, err)
	_, err = rs.Capture(ctx)
	assert.ErrorContains(t, err, "cannot capture")
	require.NoError(t, rs.Close())

	// A capture that fails midway names the op and leaves no graph.
	fb := &failing{Backend: cpu.New(), op: "offset"}
	fs, err := executor.Open(ctx, fb, pp)
	require.NoError(t, err)
	_, err = fs.Capture(ctx)
	var oe *dag.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "offset", oe.Op)
	graphs, _ := fb.last.Graphs()
	assert.Zero(t, graphs)
	require.NoError(t, fs.Close())
}

func TestUpdateRefuses(t *testing.T) {
	ctx := context.Background()
	pl := newPipeline(t, 64)
	bld := dag.New()
	stranger := bld.Buffer("stranger", 256, dag.PinnedHost(), dag.Zeros())
	p, err := planner.New(pl.g)
	require.NoError(t, err)
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	g, err := s.Capture(ctx)
	require.NoError(t, err)
	buf := func(name string) *dag.Buffer {
		for _, b := range pl.g.Buffers {
			if b.Name == name {
				return b
			}
		}
		t.Fatalf("no buffer %s", name)
		return nil
	}
	tests := []struct {
		name   string
		change executor.Change
		want   string
	}{
		{"unknown op", executor.SetArg("nope", "alpha", 1), `no op called "nope"`},
		{"not a launch", executor.SetArg("upload", "alpha", 1), "not a kernel launch"},
		{"unknown param", executor.SetArg("scale", "beta", 1), "no parameter"},
		{"misspelled op", executor.SetArg("sacle", "alpha", 1), `no op called "sacle" (did you mean "scale"?)`},
		{"misspelled param", executor.SetArg("scale", "alpah", float32(1)), `no parameter "alpah" (did you mean "alpha"?)`},
		{"beyond f32", executor.SetArg("scale", "alpha", 1e300), "1e+300 is beyond the largest f32"},
		{"buffer param", executor.SetArg("scale", "x", 1), "use Rebind"},
		{"size", executor.Rebind(pl.inA, pl.spare), "same size"},
		{"placement", executor.Rebind(pl.inA, buf("x")), "same placement"},
		{"temporary", executor.Rebind(buf("tmp"), buf("x")), "temporary"},
		{"shared memory", executor.Rebind(buf("x"), buf("ones")), "would both use the memory of ones"},
		{"foreign", executor.Rebind(pl.inA, stranger), "not a buffer of the captured plan"},
		{"nil", nil, "nil change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Update(ctx, tt.change)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Zero(t, g.Stats().Updates, "refused changes change nothing")
	require.NoError(t, g.Run(ctx))

	require.NoError(t, g.Close())
	assert.ErrorContains(t, g.Launch(ctx), "closed")
	assert.ErrorContains(t, g.Update(ctx, executor.SetArg("scale", "alpha", 1)), "closed")
	require.NoError(t, g.Close(), "closing twice is harmless")
}

// TestCaptureReleases checks that graphs are released by Graph.Close, by
// the session's Close, and on a cancelled capture.
func TestCaptureReleases(t *testing.T) {
	ctx := context.Background()
	pl := newPipeline(t, 64)
	p, err := planner.New(pl.g)
	require.NoError(t, err)
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	be := s.Device().(*cpu.Session)
	g1, err := s.Capture(ctx)
	require.NoError(t, err)
	_, err = s.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, g1.Update(ctx, executor.Rebind(pl.inA, pl.inB)))
	require.NoError(t, g1.Launch(ctx))
	graphs, events := be.Graphs()
	assert.Equal(t, 2, graphs, "the update used up its fresh capture")
	assert.Positive(t, events)
	require.NoError(t, g1.Close())
	graphs, _ = be.Graphs()
	assert.Equal(t, 1, graphs)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Capture(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	graphs, events = be.Graphs()
	assert.Zero(t, graphs)
	assert.Zero(t, events)
}

// Capture a plan once, then replay it for each new input batch: write the
// batch into the input buffer, change a kernel argument, replay.
func ExampleSession_Capture() {
	b := dag.New()
	in := b.Buffer("in", 4*4, dag.PinnedHost(), dag.Zeros())
	x := b.Buffer("x", 4*4, dag.OnDevice(0), dag.Zeros())
	sum := b.Buffer("sum", 4, dag.OnDevice(0), dag.Zeros())
	hsum := b.Buffer("hsum", 4, dag.PinnedHost(), dag.Zeros())
	b.Copy(x.All(), in.All())
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(4), x, 1.0, dag.Name("scale"))
	b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(4), sum, x)
	b.Copy(hsum.All(), sum.All())
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	graph, err := s.Capture(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for batch := range 3 {
		data := make([]float32, 4)
		for i := range data {
			data[i] = float32(batch + i)
		}
		if err := executor.WriteValues(s, in, data); err != nil {
			log.Fatal(err)
		}
		if err := graph.Update(ctx, executor.SetArg("scale", "alpha", float64(10*(batch+1)))); err != nil {
			log.Fatal(err)
		}
		if err := graph.Run(ctx); err != nil {
			log.Fatal(err)
		}
		out, err := executor.ReadValues[float32](s, hsum)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out[0])
	}
	st := graph.Stats()
	fmt.Println(st.Launches, "replays,", st.UpdatesInPlace, "updates in place")
	// Output:
	// 60
	// 200
	// 420
	// 3 replays, 3 updates in place
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
