package executor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

func TestAutoCapture(t *testing.T) {
	ctx := context.Background()
	const n, runs = 64, 10
	for _, tc := range []struct {
		after, want int // asked for, and the eager runs before the capture
		log         string
	}{
		{0, executor.DefaultAutoCapture, "runs 1-3 eager, 4-10 replayed (captured automatically after 3 identical eager runs)"},
		{1, 1, "runs 1 eager, 2-10 replayed (captured automatically after 1 identical eager run)"},
		{5, 5, "runs 1-5 eager, 6-10 replayed (captured automatically after 5 identical eager runs)"},
		{runs, runs, "runs 1-10 eager"},
	} {
		t.Run(fmt.Sprint(tc.after), func(t *testing.T) {
			pl := newPipeline(t, n)
			p, err := planner.New(pl.g)
			require.NoError(t, err)
			s, err := executor.Open(ctx, cpu.New(), p, executor.WithAutoCapture(tc.after))
			require.NoError(t, err)
			defer s.Close()
			src, err := s.Read(pl.inA)
			require.NoError(t, err)
			for run := 1; run <= runs; run++ {
				require.NoError(t, s.Run(ctx))
				got, err := s.Read(pl.out)
				require.NoError(t, err)
				require.Equal(t, affine(src, 2), f32s(got), "run %d", run)
				assert.Equal(t, run > tc.want, s.AutoGraph() != nil, "run %d", run)
				assert.Equal(t, run > tc.want, s.RunLog().Replayed(run), "run %d", run)
			}
			l := s.RunLog()
			assert.Equal(t, tc.log, l.String())
			assert.NoError(t, l.NotCaptured)
			if g := s.AutoGraph(); g != nil {
				assert.Equal(t, runs-tc.want, g.Stats().Launches)
			}
		})
	}
}

// counter is a plan whose every run adds 1 to d and copies it out, so
// that its output counts the runs that really ran.
func counter(t *testing.T, placement dag.BufferOption) (*planner.Plan, *dag.Buffer) {
	b := dag.New()
	d := b.Buffer("d", 16, dag.OnDevice(0), dag.Zeros())
	one := b.Buffer("one", 16, dag.OnDevice(0), dag.Value(1))
	h := b.Buffer("h", 16, placement, dag.Zeros())
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(4), d, one, 1.0, dag.Name("add"))
	b.Copy(h.All(), d.All(), dag.Name("download"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p, h
}

// TestAutoCaptureMatchesEager: replays carry persistent buffers over as
// eager runs do, including replays launched in batches through AutoGraph.
func TestAutoCaptureMatchesEager(t *testing.T) {
	ctx := context.Background()
	out := func(opts ...executor.Option) []float32 {
		p, h := counter(t, dag.PinnedHost())
		s, err := executor.Open(ctx, cpu.New(), p, opts...)
		require.NoError(t, err)
		defer s.Close()
		for range 5 {
			require.NoError(t, s.Run(ctx))
		}
		if g := s.AutoGraph(); g != nil {
			for range 5 {
				require.NoError(t, g.Launch(ctx))
			}
			require.NoError(t, g.Sync(ctx))
		} else {
			for range 5 {
				require.NoError(t, s.Run(ctx))
			}
		}
		got, err := s.Read(h)
		require.NoError(t, err)
		if len(opts) > 0 {
			assert.Equal(t, "runs 1-2 eager, 3-10 replayed (captured automatically after 2 identical eager runs)", s.RunLog().String())
		}
		return f32s(got)
	}
	eager := out()
	assert.Equal(t, []float32{10, 10, 10, 10}, eager, "the cpu reference: ten runs add ten")
	assert.Equal(t, eager, out(executor.WithAutoCapture(2)))
}

// TestAutoCaptureChanges: Write, SetArg and Rebind between runs reach the
// runs before and after the automatic capture.
func TestAutoCaptureChanges(t *testing.T) {
	ctx := context.Background()
	const n = 64
	pl := newPipeline(t, n)
	p, err := planner.New(pl.g)
	require.NoError(t, err)
	s, err := executor.Open(ctx, cpu.New(), p, executor.WithAutoCapture(2))
	require.NoError(t, err)
	defer s.Close()
	check := func(in *dag.Buffer, alpha float32, replayed bool) {
		t.Helper()
		require.NoError(t, s.Run(ctx))
		src, err := s.Read(in)
		require.NoError(t, err)
		got, err := s.Read(pl.out)
		require.NoError(t, err)
		require.Equal(t, affine(src, alpha), f32s(got))
		require.Equal(t, replayed, s.AutoGraph() != nil)
	}
	check(pl.inA, 2, false)
	require.NoError(t, s.Update(ctx, executor.SetArg(pl.scale, "alpha", 3)))
	check(pl.inA, 3, false) // the change starts the count again
	check(pl.inA, 3, false)
	check(pl.inA, 3, true)
	batch := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(batch[4*i:], math.Float32bits(float32(i)))
	}
	require.NoError(t, s.Write(pl.inA, batch))
	check(pl.inA, 3, true)
	require.NoError(t, s.Update(ctx, executor.Rebind(pl.inA, pl.inB)))
	check(pl.inB, 3, true)
	require.NoError(t, s.Write(pl.inB, batch))
	check(pl.inB, 3, true)
	require.NoError(t, s.Update(ctx, executor.Rebind(pl.inA, pl.inA), executor.SetArg("scale", "alpha", -0.5)))
	check(pl.inA, -0.5, true)
	assert.Error(t, s.Update(ctx, executor.SetArg("nope", "alpha", 1)), "a bad change changes nothing")
	check(pl.inA, -0.5, true)
	st := s.AutoGraph().Stats()
	assert.Equal(t, 2, st.Updates)
	assert.Equal(t, 6, st.Launches)
	assert.Equal(t, "runs 1-3 eager, 4-9 replayed (captured automatically after 2 identical eager runs)", s.RunLog().String())
}

// TestAutoCaptureStaysEager: what a graph cannot hold keeps the session
// eager, and the log says why.
func TestAutoCaptureStaysEager(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		placement dag.BufferOption
		opts      []executor.Option
		why       string
	}{
		{"pageable copy", dag.PageableHost(), nil, "pageable host buffer h"},
		{"faults", dag.PinnedHost(), []executor.Option{executor.WithChaos(1)}, "faults are injected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, h := counter(t, tc.placement)
			s, err := executor.Open(ctx, cpu.New(), p, append(tc.opts, executor.WithAutoCapture(1))...)
			require.NoError(t, err)
			defer s.Close()
			for range 4 {
				require.NoError(t, s.Run(ctx))
			}
			got, err := s.Read(h)
			require.NoError(t, err)
			assert.Equal(t, []float32{4, 4, 4, 4}, f32s(got))
			assert.Nil(t, s.AutoGraph())
			l := s.RunLog()
			assert.Equal(t, "runs 1-4 eager", l.String())
			assert.ErrorContains(t, l.NotCaptured, tc.why)
		})
	}

	// Without WithAutoCapture a session never captures.
	p, _ := counter(t, dag.PinnedHost())
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	for range 5 {
		require.NoError(t, s.Run(ctx))
	}
	assert.Nil(t, s.AutoGraph())
	assert.Equal(t, "runs 1-5 eager", s.RunLog().String())
	assert.NoError(t, s.RunLog().NotCaptured)
}

func ExampleWithAutoCapture() {
	ctx := context.Background()
	b := dag.New()
	d := b.Buffer("d", 16, dag.OnDevice(0), dag.Zeros())
	one := b.Buffer("one", 16, dag.OnDevice(0), dag.Value(1))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(4), d, one, 1.0)
	g, _ := b.Build()
	p, _ := planner.New(g)
	be := cpu.New()
	defer be.Close()
	s, err := executor.Open(ctx, be, p, executor.WithAutoCapture(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for range 100 {
		if err := s.Run(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(s.RunLog())
	// Output: runs 1-3 eager, 4-100 replayed (captured automatically after 3 identical eager runs)
}
