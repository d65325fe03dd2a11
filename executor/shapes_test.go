package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/device/memdev"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// shapeProgram is a program of one parameter, T: y = 3 (x + x) for
// x of T random f32s, through two temporaries (of T and 2T elements, so
// that the plans have arenas that grow with T), and w four f32s of 0.5
// that every shape shares.
func shapeProgram(_ context.Context, v map[string]int64) (*dag.Graph, error) {
	t := v["T"]
	b := dag.New()
	x := b.Array("x", dag.F32, t, dag.Random(1))
	w := b.Array("w", dag.F32, 4, dag.Value(0.5))
	t1 := b.Array("t1", dag.F32, t, dag.Temporary())
	t2 := b.Array("t2", dag.F32, 2*t, dag.Temporary())
	y := b.Array("y", dag.F32, t)
	one, th := dag.Grid1(1), dag.Grid1(int(min(t, 256)))
	b.Copy(t1.All(), x.All())
	b.Call(dag.Axpy, one, th, dag.Args{"y": t1, "x": x, "alpha": 1})
	b.Copy(t2.Slice(0, t*4), t1.All())
	b.Call(dag.Scale, one, th, dag.Args{"x": t2.Slice(0, t*4), "alpha": 3})
	b.Copy(y.All(), t2.Slice(0, t*4))
	b.Call(dag.Scale, one, one, dag.Args{"x": w, "alpha": 1}) // uses w, changes nothing
	return b.Build()
}

// shapeBackends are the backends the Shapes tests run on.
func shapeBackends() map[string]func() device.Backend {
	return map[string]func() device.Backend{
		"cpu": func() device.Backend { return cpu.New(cpu.Workers(2)) },
		"mem": func() device.Backend { return memdev.New() },
	}
}

// fresh is y of the program at T run once in a session of its own.
func fresh(t *testing.T, b device.Backend, T int64) []byte {
	g, err := shapeProgram(context.Background(), map[string]int64{"T": T})
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	out, err := executor.Execute(context.Background(), b, p)
	require.NoError(t, err)
	for buf, data := range out {
		if buf.Name == "y" {
			return data
		}
	}
	t.Fatal("no y")
	return nil
}

func at(T int64) map[string]int64 { return map[string]int64{"T": T} }

// Every shape's outputs equal a fresh single-shape session's: captured at
// its first run, replayed at the next, whichever shapes ran between.
func TestShapesMatchFreshSessions(t *testing.T) {
	for name, mk := range shapeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk()
			defer b.Close()
			s, err := executor.OpenShapes(ctx, b, shapeProgram)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			seen := map[int64]bool{}
			// The largest first: the others fit the memory it allocates
			// (TestShapesGrowKeepsContents grows it).
			for _, T := range []int64{256, 64, 128, 256, 64, 128} {
				sr, err := s.Run(ctx, at(T))
				require.NoError(t, err, "T=%d", T)
				assert.Equal(t, !seen[T], sr.Opened, "T=%d opened at its first run only", T)
				assert.Equal(t, !seen[T], sr.Captured, "T=%d", T)
				assert.Equal(t, seen[T], sr.Replayed, "T=%d replays its graph after the first run, which it captures while running eagerly", T)
				assert.Empty(t, sr.Eager)
				seen[T] = true
				y, err := s.Read("y")
				require.NoError(t, err)
				require.Equal(t, fresh(t, mk(), T), y, "T=%d", T)
			}
			held, shared, why := s.Memory()
			require.True(t, shared, why)
			require.NotEmpty(t, held)
		})
	}
}

// The least recently run shape is dropped for a new one, and opened and
// captured again at its next run.
func TestShapesKeepTheMostRecent(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	s, err := executor.OpenShapes(ctx, b, shapeProgram, executor.WithKeep(2))
	require.NoError(t, err)
	defer s.Close()
	var first32 *planner.Plan
	for _, T := range []int64{16, 32} {
		sr, err := s.Run(ctx, at(T))
		require.NoError(t, err)
		assert.Positive(t, sr.Took.Build, "T=%d is built at its first run", T)
		assert.Positive(t, sr.Took.Plan, "and planned")
		first32 = sr.Plan
	}
	_, err = s.Run(ctx, at(16)) // 16 is now the most recent
	require.NoError(t, err)
	sr, err := s.Run(ctx, at(8))
	require.NoError(t, err)
	assert.Equal(t, []map[string]int64{at(32)}, sr.Dropped)
	assert.Equal(t, []map[string]int64{at(16), at(8)}, s.Kept())
	sr, err = s.Run(ctx, at(32))
	require.NoError(t, err)
	assert.True(t, sr.Opened && sr.Captured)
	assert.Equal(t, []map[string]int64{at(16)}, sr.Dropped)
	took := sr.Took
	for name, d := range map[string]time.Duration{"drop": took.Drop, "open": took.Open, "capture": took.Capture, "instantiate": took.Instantiate} {
		assert.Positive(t, d, "%s of a shape opened and captured", name)
	}
	assert.Zero(t, took.Build+took.Plan, "a shape that returns keeps its plan: it is not built and planned again")
	assert.Same(t, first32, sr.Plan)
	y, err := s.Read("y")
	require.NoError(t, err)
	assert.Equal(t, fresh(t, cpu.New(), 32), y)
	sr, err = s.Run(ctx, at(32))
	require.NoError(t, err)
	assert.True(t, sr.Replayed && !sr.Opened)
	assert.Zero(t, sr.Took, "a shape kept opens nothing")
	_, err = executor.OpenShapes(ctx, b, shapeProgram, executor.WithKeep(1), executor.WithBuckets(at(8), at(16)))
	require.ErrorContains(t, err, "2 buckets and WithKeep(1)")
}

// A value between buckets runs on the next larger one when its parameter
// is paddable: its elements are the first of the bucket's.
func TestShapesPadToBucket(t *testing.T) {
	for name, mk := range shapeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk()
			defer b.Close()
			s, err := executor.OpenShapes(ctx, b, shapeProgram,
				executor.WithBuckets(at(64), at(128), at(256)), executor.WithPaddable("T"))
			require.NoError(t, err)
			defer s.Close()
			assert.ElementsMatch(t, []map[string]int64{at(64), at(128), at(256)}, s.Kept(), "buckets open ahead")
			sr, err := s.Run(ctx, at(100))
			require.NoError(t, err)
			assert.True(t, sr.Padded)
			assert.Equal(t, at(128), sr.Shape)
			assert.False(t, sr.Opened, "the bucket was captured when the Shapes opened")
			assert.True(t, sr.Replayed)
			y, err := s.Read("y")
			require.NoError(t, err)
			require.Len(t, y, 128*4)
			assert.Equal(t, fresh(t, mk(), 100), y[:100*4])
			// A padded input may be shorter than the bucket's buffer.
			in := make([]byte, 100*4)
			for i := range 100 {
				binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(i)))
			}
			_, err = s.Write(ctx, at(100), "x", in)
			require.NoError(t, err)
			_, err = s.Run(ctx, at(100))
			require.NoError(t, err)
			y, err = s.Read("y")
			require.NoError(t, err)
			for i := range 128 {
				want := float32(0)
				if i < 100 {
					want = 6 * float32(i)
				}
				require.Equal(t, want, math.Float32frombits(binary.LittleEndian.Uint32(y[4*i:])), "y[%d]", i)
			}
		})
	}
}

// A value between buckets whose parameter is not paddable runs eagerly,
// saying why, and computes what a fresh session does; so does one above
// every bucket.
func TestShapesEagerBetweenBuckets(t *testing.T) {
	for name, mk := range shapeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk()
			defer b.Close()
			s, err := executor.OpenShapes(ctx, b, shapeProgram, executor.WithBuckets(at(64), at(128)))
			require.NoError(t, err)
			defer s.Close()
			sr, err := s.Run(ctx, at(100))
			require.NoError(t, err)
			assert.False(t, sr.Padded || sr.Replayed)
			assert.Equal(t, "T=100 is not a bucket (T=64; T=128), and a larger bucket would pad T, which is not paddable", sr.Eager)
			y, err := s.Read("y")
			require.NoError(t, err)
			assert.Equal(t, fresh(t, mk(), 100), y)
			sr, err = s.Run(ctx, at(512))
			require.NoError(t, err)
			assert.Contains(t, sr.Eager, "no bucket is as large in every parameter")
			assert.True(t, sr.Grew, "512 needs more than the buckets")
			y, err = s.Read("y")
			require.NoError(t, err)
			assert.Equal(t, fresh(t, mk(), 512), y)
			sr, err = s.Run(ctx, at(64))
			require.NoError(t, err)
			assert.True(t, sr.Captured && sr.Opened, "the bucket, dropped when the memory grew, is captured again")
		})
	}
}

// The shapes' temporaries share one arena as large as the largest plan's,
// not the sum of them, and the persistent buffers are held once, at the
// largest shape's size; the verifier passes the plans' sharing.
func TestShapesArenaIsTheLargest(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	s, err := executor.OpenShapes(ctx, b, shapeProgram)
	require.NoError(t, err)
	defer s.Close()
	var plans []*planner.Plan
	var sum, largest int64
	for _, T := range []int64{128, 1024, 512} {
		sr, err := s.Run(ctx, at(T))
		require.NoError(t, err)
		plans = append(plans, sr.Plan)
		require.Len(t, sr.Plan.Memory.Memories, 1)
		arena := sr.Plan.Memory.Memories[0].ArenaBytes
		require.Positive(t, arena)
		sum += arena
		largest = max(largest, arena)
	}
	held, shared, why := s.Memory()
	require.True(t, shared, why)
	require.Len(t, held, 1)
	assert.Equal(t, largest, held[0].Arena)
	assert.Less(t, held[0].Arena, sum)
	assert.Equal(t, int64(1024*4+16+1024*4), held[0].Persistent, "x and y at T=1024, and w")
	require.NoError(t, verify.Shared(map[int]int64{held[0].Memory: held[0].Arena}, plans...))
	require.Error(t, verify.Shared(map[int]int64{held[0].Memory: largest - 256}, plans...), "the largest plan does not fit a smaller arena")
}

// One shape runs at a time: a call while another is in flight fails with
// ErrBusy, naming it, and the Shapes goes on afterwards.
func TestShapesOneAtATime(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	started, release := make(chan struct{}), make(chan struct{})
	build := func(ctx context.Context, v map[string]int64) (*dag.Graph, error) {
		g := dag.New()
		h := g.Array("h", dag.F32, v["T"], dag.PinnedHost(), dag.Zeros())
		g.Host(func(context.Context, [][]byte) error {
			if v["T"] == 1 {
				close(started)
				<-release
			}
			return nil
		}, dag.Out(h.All()))
		return g.Build()
	}
	s, err := executor.OpenShapes(ctx, b, build, executor.WithGraph(executor.GraphNever))
	require.NoError(t, err)
	defer s.Close()
	done := make(chan error)
	go func() {
		_, err := s.Run(ctx, at(1))
		done <- err
	}()
	<-started
	_, err = s.Run(ctx, at(2))
	require.ErrorIs(t, err, device.ErrBusy)
	assert.ErrorContains(t, err, "Run of T=1 is in flight")
	_, err = s.Read("h")
	require.ErrorIs(t, err, device.ErrBusy)
	close(release)
	require.NoError(t, <-done)
	sr, err := s.Run(ctx, at(2))
	require.NoError(t, err)
	assert.Equal(t, "graphs were not asked for", sr.Eager)
}

// When a larger shape comes, the memory is allocated again, larger, and
// what the buffers held moves into their first bytes.
func TestShapesGrowKeepsContents(t *testing.T) {
	for name, mk := range shapeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk()
			defer b.Close()
			s, err := executor.OpenShapes(ctx, b, shapeProgram)
			require.NoError(t, err)
			defer s.Close()
			w := make([]byte, 16)
			binary.LittleEndian.PutUint32(w, math.Float32bits(7))
			_, err = s.Write(ctx, at(8), "w", w)
			require.NoError(t, err)
			sr, err := s.Run(ctx, at(64))
			require.NoError(t, err)
			assert.True(t, sr.Grew)
			assert.Equal(t, []map[string]int64{at(8)}, sr.Dropped)
			got, err := s.Read("w")
			require.NoError(t, err)
			assert.Equal(t, w, got, "w carried over")
		})
	}
}

// Shapes whose buffers of one name start differently cannot share them:
// the error names the buffer and both shapes, and nothing kept is dropped.
func TestShapesRefuseUnlikeBuffers(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	build := func(_ context.Context, v map[string]int64) (*dag.Graph, error) {
		g := dag.New()
		x := g.Array("x", dag.F32, v["T"], dag.Random(uint64(v["T"])))
		g.Call(dag.Scale, dag.Grid1(1), dag.Grid1(1), dag.Args{"x": x, "alpha": 2})
		return g.Build()
	}
	s, err := executor.OpenShapes(ctx, b, build)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Run(ctx, at(8))
	require.NoError(t, err)
	_, err = s.Run(ctx, at(16))
	require.ErrorContains(t, err, `buffer "x" starts with other contents at T=8 than at T=16`)
	assert.Equal(t, []map[string]int64{at(8)}, s.Kept())
}

// backendOnly hides every capability of a backend but device.Backend.
type backendOnly struct{ device.Backend }

// On a backend that cannot share memory every shape holds its own, and
// Memory says so; the outputs are the same.
func TestShapesWithoutSharing(t *testing.T) {
	ctx := context.Background()
	b := backendOnly{cpu.New(cpu.Workers(2))}
	defer b.Close()
	s, err := executor.OpenShapes(ctx, b, shapeProgram)
	require.NoError(t, err)
	defer s.Close()
	for _, T := range []int64{32, 64} {
		_, err := s.Run(ctx, at(T))
		require.NoError(t, err)
		y, err := s.Read("y")
		require.NoError(t, err)
		assert.Equal(t, fresh(t, cpu.New(), T), y)
	}
	_, shared, why := s.Memory()
	assert.False(t, shared)
	assert.Contains(t, why, "cannot open a session over another's memory")
}

// Repeat runs a shape n times as a Runner does, and the errors of the
// program's function and of closed Shapes say where they come from.
func TestShapesRepeatAndErrors(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	build := func(ctx context.Context, v map[string]int64) (*dag.Graph, error) {
		if v["T"] < 0 {
			return nil, errors.New("T must be positive")
		}
		return shapeProgram(ctx, v)
	}
	s, err := executor.OpenShapes(ctx, b, build)
	require.NoError(t, err)
	rep, err := s.Repeat(ctx, at(32), 5)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Runs)
	require.NotNil(t, rep.Replays)
	assert.Equal(t, 5, rep.Replays.Replays)
	assert.True(t, rep.Captured)
	_, err = s.Run(ctx, at(-1))
	require.ErrorContains(t, err, "executor: Shapes: the graph of T=-1: T must be positive")
	require.NoError(t, s.Close())
	_, err = s.Run(ctx, at(32))
	require.ErrorIs(t, err, device.ErrClosed)
}

// A program that changes its buffers in place carries them from shape to
// shape, unless WithInitialContents loads each shape's own at a switch.
func TestShapesInitialContents(t *testing.T) {
	ctx := context.Background()
	build := func(_ context.Context, v map[string]int64) (*dag.Graph, error) {
		g := dag.New()
		x := g.Array("x", dag.F32, v["T"], dag.Value(1))
		g.Call(dag.Scale, dag.Grid1(1), dag.Grid1(1), dag.Args{"x": x, "alpha": 2})
		return g.Build()
	}
	first := func(opts ...executor.Option) float32 {
		b := cpu.New(cpu.Workers(2))
		defer b.Close()
		s, err := executor.OpenShapes(ctx, b, build, append(opts, executor.WithBuckets(at(8), at(16)))...)
		require.NoError(t, err)
		defer s.Close()
		_, err = s.Run(ctx, at(8))
		require.NoError(t, err)
		_, err = s.Run(ctx, at(16))
		require.NoError(t, err)
		x, err := s.Read("x")
		require.NoError(t, err)
		return math.Float32frombits(binary.LittleEndian.Uint32(x))
	}
	assert.Equal(t, float32(4), first(), "x[0] doubled by both shapes")
	assert.Equal(t, float32(2), first(executor.WithInitialContents()), "x[0] doubled by T=16 alone")
}

// A plan a graph cannot hold runs eagerly, saying why in one line.
func TestShapesEagerWhenCaptureRefused(t *testing.T) {
	ctx := context.Background()
	b := cpu.New(cpu.Workers(2))
	defer b.Close()
	build := func(_ context.Context, v map[string]int64) (*dag.Graph, error) {
		g := dag.New()
		h := g.Array("h", dag.F32, v["T"], dag.PageableHost(), dag.Value(1))
		d := g.Array("d", dag.F32, v["T"])
		g.Copy(d.All(), h.All())
		g.Call(dag.Scale, dag.Grid1(1), dag.Grid1(1), dag.Args{"x": d, "alpha": 2})
		g.Copy(h.All(), d.All())
		return g.Build()
	}
	s, err := executor.OpenShapes(ctx, b, build)
	require.NoError(t, err)
	defer s.Close()
	sr, err := s.Run(ctx, at(4))
	require.NoError(t, err)
	assert.False(t, sr.Replayed)
	assert.Contains(t, sr.Eager, "the plan cannot be captured: ")
	assert.NotContains(t, sr.Eager, "\n")
	h, err := s.Read("h")
	require.NoError(t, err)
	assert.Equal(t, float32(2), math.Float32frombits(binary.LittleEndian.Uint32(h)))
}

// A new shape's first run, eager while its graph is captured, may fail:
// the failure names the op, the shape it replaced is closed all the same,
// and the graph captured beside the failed run replays what a fresh
// session computes.
func TestShapesFirstRunFails(t *testing.T) {
	for name, mk := range shapeBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk()
			defer b.Close()
			s, err := executor.OpenShapes(ctx, b, shapeProgram, executor.WithKeep(1), executor.WithFailOp("scale3"))
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			sr, err := s.Run(ctx, at(64))
			require.ErrorIs(t, err, executor.ErrInjected)
			require.ErrorContains(t, err, `"scale3"`)
			assert.True(t, sr.Opened && sr.Captured && !sr.Replayed, "captured beside the failed run")
			sr, err = s.Run(ctx, at(32)) // drops 64, its session closed while 32 runs
			require.ErrorIs(t, err, executor.ErrInjected)
			assert.Equal(t, []map[string]int64{at(64)}, sr.Dropped)
			sr, err = s.Run(ctx, at(32))
			require.NoError(t, err, "a replay injects no fault")
			assert.True(t, sr.Replayed)
			y, err := s.Read("y")
			require.NoError(t, err)
			assert.Equal(t, fresh(t, mk(), 32), y)
		})
	}
}
