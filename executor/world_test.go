package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
)

// rankProgram is one rank's program of a small data-parallel step: each
// rank computes its gradient g = 2*(rank+1) while an unrelated launch runs
// beside the all-reduce, gathers every rank's part, and passes its part
// round the ring with send and recv.
type rankProgram struct {
	plan                  *planner.Plan
	g, avg, all, got, aux *dag.Buffer
}

func newRankProgram(t testing.TB, rank, world int, edit func(b *dag.Builder, g *dag.Buffer)) rankProgram {
	t.Helper()
	b := dag.New()
	var p rankProgram
	p.g = b.Buffer("g", 4*8, dag.Of(dag.F32), dag.Zeros())
	p.avg = b.Buffer("avg", 8*4, dag.Of(dag.I64), dag.Value(float64(rank*10)))
	part := b.Buffer("part", 4*2, dag.Of(dag.F32), dag.Zeros())
	p.all = b.Buffer("all", int64(4*2*world), dag.Of(dag.F32), dag.Zeros())
	p.got = b.Buffer("got", 4*2, dag.Of(dag.F32), dag.Zeros())
	p.aux = b.Buffer("aux", 4*64, dag.Of(dag.F32), dag.Zeros())
	one := dag.Grid1(1)
	b.Fill(p.g.All(), float64(rank+1), dag.Name("fill_g"))
	b.Launch(dag.Scale, one, dag.Grid1(8), p.g, 2.0, dag.Name("grad"))
	if edit != nil {
		edit(b, p.g)
	}
	b.AllReduce(p.g.All(), dag.Sum, dag.Name("reduce_g"))
	b.Launch(dag.Iota, one, dag.Grid1(64), p.aux, 1.0, dag.Name("other_layer"))
	b.AllReduce(p.avg.All(), dag.Avg, dag.Name("avg"))
	b.Launch(dag.Iota, one, dag.Grid1(2), part, float64(10*rank), dag.Name("part"))
	b.AllGather(part.All(), p.all.All(), dag.Name("gather"))
	if world > 1 {
		b.Send(part.All(), (rank+1)%world, dag.Name("send_next"))
		b.Recv(p.got.All(), (rank+world-1)%world, dag.Name("recv_prev"))
	} else {
		b.Copy(p.got.All(), part.All(), dag.Name("keep"))
	}
	g, err := b.Build()
	require.NoError(t, err)
	p.plan, err = planner.New(g)
	require.NoError(t, err)
	return p
}

func programs(t testing.TB, world int, edit func(rank int, b *dag.Builder, g *dag.Buffer)) ([]rankProgram, []*planner.Plan) {
	progs := make([]rankProgram, world)
	plans := make([]*planner.Plan, world)
	for r := range world {
		var e func(*dag.Builder, *dag.Buffer)
		if edit != nil {
			e = func(b *dag.Builder, g *dag.Buffer) { edit(r, b, g) }
		}
		progs[r] = newRankProgram(t, r, world, e)
		plans[r] = progs[r].plan
	}
	return progs, plans
}

// checkRank checks rank r's buffers after one run of a world of n.
func checkRank(t *testing.T, read func(*dag.Buffer) ([]byte, error), p rankProgram, r, n int) {
	t.Helper()
	g, err := read(p.g)
	require.NoError(t, err)
	for i := range 8 {
		assert.Equal(t, float32(n*(n+1)), math.Float32frombits(binary.LittleEndian.Uint32(g[4*i:])), "rank %d g[%d]", r, i)
	}
	avg, err := read(p.avg)
	require.NoError(t, err)
	sum := int64(0)
	for k := range n {
		sum += int64(10 * k)
	}
	assert.Equal(t, sum/int64(n), int64(binary.LittleEndian.Uint64(avg)), "rank %d avg", r)
	all, err := read(p.all)
	require.NoError(t, err)
	for k := range n {
		for i := range 2 {
			assert.Equal(t, float32(10*k+i), f32(all[8*k+4*i:]), "rank %d all[%d]", r, 2*k+i)
		}
	}
	got, err := read(p.got)
	require.NoError(t, err)
	prev := (r + n - 1) % n
	assert.Equal(t, float32(10*prev), f32(got), "rank %d got", r)
	assert.Equal(t, float32(10*prev+1), f32(got[4:]), "rank %d got", r)
}

func f32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

func TestWorldRun(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			be := cpu.New(cpu.Workers(2), cpu.Delays(int64(n), 200*time.Microsecond))
			defer be.Close()
			progs, plans := programs(t, n, nil)
			w, err := executor.OpenWorld(t.Context(), be, plans, executor.WithRankTimeout(20*time.Second))
			require.NoError(t, err)
			defer w.Close()
			require.Equal(t, n, w.Size())
			require.NoError(t, w.Run(t.Context()))
			for r := range n {
				checkRank(t, func(b *dag.Buffer) ([]byte, error) { return w.Read(r, b) }, progs[r], r, n)
			}

			// Replays of the captured world give the same, run after run
			// (the fill resets g, so every run's result is the same).
			g, err := w.Capture(t.Context())
			require.NoError(t, err)
			for range 3 {
				require.NoError(t, g.Run(t.Context()))
			}
			for r := range n {
				checkRank(t, func(b *dag.Buffer) ([]byte, error) { return w.Read(r, b) }, progs[r], r, n)
			}
			require.NoError(t, g.Close())
			require.NoError(t, w.Close())
			assert.Zero(t, be.Sessions(), "sessions left open")
		})
	}
}

// TestCollectivesAlone: a session that never joined a world is the one
// rank of a world of 1.
func TestCollectivesAlone(t *testing.T) {
	p := newRankProgram(t, 0, 1, nil)
	s, err := executor.Open(t.Context(), cpu.New(), p.plan)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Run(t.Context()))
	checkRank(t, s.Read, p, 0, 1)

	b := dag.New()
	x := b.Buffer("x", 16, dag.Of(dag.F32), dag.Zeros())
	b.Send(x.All(), 0, dag.Name("to_self"))
	b.Recv(x.Slice(0, 8), 0, dag.Name("short_recv"))
	g, err := b.Build()
	require.NoError(t, err)
	pl, err := planner.New(g)
	require.NoError(t, err)
	_, err = executor.Execute(t.Context(), cpu.New(), pl)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "short_recv"`)
}

func TestWorldRefuses(t *testing.T) {
	be := cpu.New()
	defer be.Close()
	cases := []struct {
		name  string
		world int
		edit  func(rank int, b *dag.Builder, g *dag.Buffer)
		want  []string
	}{
		{"size differs", 2, func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 1 {
				b.AllReduce(g.Slice(0, 16), dag.Sum, dag.Name("half"))
			} else {
				b.AllReduce(g.All(), dag.Sum, dag.Name("half"))
			}
		}, []string{`rank 1 has "all_reduce half: 4 x f32, sum"`, `rank 0 has "all_reduce half: 8 x f32, sum"`}},
		{"order differs", 3, func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 2 {
				b.Broadcast(g.All(), 0, dag.Name("bcast"))
				b.AllReduce(g.All(), dag.Max, dag.Name("max"))
			} else {
				b.AllReduce(g.All(), dag.Max, dag.Name("max"))
				b.Broadcast(g.All(), 0, dag.Name("bcast"))
			}
		}, []string{"differ at #1", `rank 2 has "broadcast bcast`}},
		{"root outside", 2, func(rank int, b *dag.Builder, g *dag.Buffer) {
			b.Broadcast(g.All(), 5, dag.Name("far_root"))
		}, []string{"rank 0", `op "far_root"`, "root rank 5 is not in a world of 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, plans := programs(t, c.world, c.edit)
			w, err := executor.OpenWorld(t.Context(), be, plans)
			require.Error(t, err)
			assert.Nil(t, w)
			for _, s := range c.want {
				assert.Contains(t, err.Error(), s)
			}
			assert.Zero(t, be.Sessions())
		})
	}
}

// failingHost is a host step that fails on one rank, before that rank's
// all-reduce, so the other ranks wait in it for a rank that never comes.
func failingHost(failRank int) func(rank int, b *dag.Builder, g *dag.Buffer) {
	return func(rank int, b *dag.Builder, g *dag.Buffer) {
		loss := b.Buffer("loss", g.Size, dag.Of(dag.F32), dag.PinnedHost(), dag.Zeros())
		zeros := b.Buffer("zeros", g.Size, dag.Of(dag.F32), dag.Zeros())
		b.Host(func(context.Context, [][]byte) error {
			if rank == failRank {
				return errors.New("the loss is NaN")
			}
			return nil
		}, dag.InOut(loss.All()), dag.Name("check_loss"))
		b.Copy(zeros.All(), loss.All(), dag.Name("upload_loss"))
		b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(8), g, zeros, 1.0, dag.Name("add_loss"))
	}
}

func TestWorldRankFails(t *testing.T) {
	be := cpu.New()
	defer be.Close()
	_, plans := programs(t, 3, failingHost(1))
	// The timeout is long: the others must fail because rank 1 tells them,
	// not because they give up waiting.
	w, err := executor.OpenWorld(t.Context(), be, plans, executor.WithRankTimeout(time.Minute))
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = w.Run(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the ranks waited for the failed one")
	var re *executor.RankError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Rank)
	assert.Contains(t, err.Error(), `rank 1: op "check_loss": the loss is NaN`)
	assert.NotContains(t, err.Error(), "rank 0:", "the others' errors are consequences")

	err = w.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "close the world")
	require.NoError(t, w.Close())
	assert.Zero(t, be.Sessions())
}

func TestWorldSendRecvMismatch(t *testing.T) {
	be := cpu.New()
	defer be.Close()
	cases := []struct {
		name string
		edit func(rank int, b *dag.Builder, g *dag.Buffer)
		want []string
		is   error
	}{
		{"send without its recv", func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 0 {
				b.Send(g.All(), 0, dag.Name("lonely_send"))
			}
		}, []string{"sends that no recv took: 1 from rank 0 to rank 0"}, comm.ErrUnmatched},
		{"sizes differ", func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 0 {
				b.Send(g.All(), 1, dag.Name("big_send"))
			}
		}, []string{`rank 1: op "recv_prev"`, "rank 0's view holds 32 bytes, rank 1's 8"}, comm.ErrMismatch},
		{"recv without its send", func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 1 {
				b.Recv(g.All(), 0, dag.Name("waits_forever"))
			}
			// Rank 0 then waits in reduce_g for rank 1: the rank that gives
			// up first names the op it waited in.
		}, []string{`: op "`, "within 300ms (is it running, and issuing the same collectives?)"}, comm.ErrTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, plans := programs(t, 2, c.edit)
			w, err := executor.OpenWorld(t.Context(), be, plans, executor.WithRankTimeout(300*time.Millisecond))
			require.NoError(t, err)
			defer w.Close()
			err = w.Run(t.Context())
			require.Error(t, err)
			assert.ErrorIs(t, err, c.is)
			for _, s := range c.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// joinAll runs JoinWorld for every rank in ranks, each from its own
// goroutine, against a rendezvous on a free port; it returns the ranks that
// joined and the error of each.
func joinAll(t *testing.T, plans []*planner.Plan, ranks []int, timeout time.Duration) ([]*executor.Rank, []error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := len(plans)
	out := make([]*executor.Rank, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() {
			place, err := comm.Explicit(r, n, func(k string) string {
				if k == "DAGRUN_PORT" {
					return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
				}
				return ""
			})
			if err != nil {
				errs[r] = err
				return
			}
			opts := []executor.Option{executor.WithRankTimeout(timeout)}
			if r == 0 {
				opts = append(opts, executor.WithRendezvousListener(ln))
			}
			out[r], errs[r] = executor.JoinWorld(t.Context(), cpu.New(), plans[r], place, opts...)
		})
	}
	if len(ranks) == 0 || ranks[0] != 0 {
		ln.Close()
	}
	wg.Wait()
	return out, errs
}

func TestJoinWorld(t *testing.T) {
	const n = 3
	progs, plans := programs(t, n, nil)
	ranks, errs := joinAll(t, plans, []int{0, 1, 2}, 20*time.Second)
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = ranks[r].Run(t.Context()) })
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		checkRank(t, ranks[r].Session().Read, progs[r], r, n)
		assert.False(t, ranks[r].Rendezvous().IsZero())
		assert.Equal(t, r, ranks[r].Place().Rank)
	}
	for r := range n {
		wg.Go(func() { errs[r] = ranks[r].Close() })
	}
	wg.Wait()
	for r := range n {
		assert.NoError(t, errs[r])
	}
}

func TestJoinWorldRefuses(t *testing.T) {
	t.Run("missing rank", func(t *testing.T) {
		_, plans := programs(t, 3, nil)
		_, errs := joinAll(t, plans, []int{0, 1}, 500*time.Millisecond)
		require.Error(t, errs[0])
		assert.Contains(t, errs[0].Error(), "rank 2 of 3 did not reach the rendezvous")
		require.Error(t, errs[1])
	})
	t.Run("order differs", func(t *testing.T) {
		_, plans := programs(t, 2, func(rank int, b *dag.Builder, g *dag.Buffer) {
			if rank == 1 {
				b.AllReduce(g.All(), dag.Max, dag.Name("extra"))
			}
		})
		_, errs := joinAll(t, plans, []int{0, 1}, 10*time.Second)
		for r := range 2 {
			require.Error(t, errs[r], "rank %d", r)
			assert.ErrorIs(t, errs[r], comm.ErrMismatch)
			assert.Contains(t, errs[r].Error(), `"all_reduce extra: 8 x f32, max"`)
		}
	})
	t.Run("rank fails mid-run", func(t *testing.T) {
		_, plans := programs(t, 2, failingHost(0))
		ranks, errs := joinAll(t, plans, []int{0, 1}, time.Minute)
		for r := range 2 {
			require.NoError(t, errs[r])
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() { errs[r] = ranks[r].Run(ctx) })
		}
		wg.Wait()
		require.NoError(t, ctx.Err(), "rank 1 waited for the failed rank")
		assert.Contains(t, errs[0].Error(), `rank 0: op "check_loss": the loss is NaN`)
		assert.ErrorIs(t, errs[1], comm.ErrAborted)
		assert.Contains(t, errs[1].Error(), "rank 0 failed")
		for r := range 2 {
			wg.Go(func() { ranks[r].Close() })
		}
		wg.Wait()
	})
}

// A rank's error names the rank once, also when internal/comm named it.
func TestRankErrorNamesTheRankOnce(t *testing.T) {
	inner := &comm.Error{Rank: 0, Op: "all_reduce", Peer: 1, Msg: "no data from rank 1 within 1s", Err: comm.ErrTimeout}
	assert.Equal(t, "rank 0: all_reduce: no data from rank 1 within 1s", (&executor.RankError{Rank: 0, Err: inner}).Error())
	assert.Equal(t, "rank 2: the op failed", (&executor.RankError{Rank: 2, Err: errors.New("the op failed")}).Error())
}
