package executor_test

import (
	"context"
	"errors"
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
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
)

// libBackend stands in for a backend with a collective library of its
// own (NCCL): it makes a unique id, and its sessions join with it alone.
type libBackend struct {
	*cpu.Backend
	id     []byte
	mu     sync.Mutex
	joined map[int]device.World
}

func (b *libBackend) UniqueID() ([]byte, error) { return b.id, nil }

func (b *libBackend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := b.Backend.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return &libSession{Session: s, b: b}, nil
}

type libSession struct {
	*cpu.Session
	b *libBackend
}

func (s *libSession) Join(_ context.Context, w device.World) error {
	if w.Comm != nil || len(w.UniqueID) == 0 {
		return errors.New("a library backend joins with the unique id alone")
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.joined[w.Rank] = w
	return nil
}

// hostProgram is a program of one host step: on rank fail it fails, on the
// others it waits for its context to end, as a collective waits for a rank
// that never comes.
func hostProgram(t *testing.T, rank, fail int) *planner.Plan {
	b := dag.New()
	h := b.Buffer("h", 8, dag.PinnedHost(), dag.Zeros())
	b.Host(func(ctx context.Context, _ [][]byte) error {
		if rank == fail {
			return errors.New("out of memory")
		}
		<-ctx.Done()
		return ctx.Err()
	}, dag.InOut(h.All()), dag.Name("step"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

func TestWorldLibrary(t *testing.T) {
	t.Run("in one process", func(t *testing.T) {
		lib := &libBackend{Backend: cpu.New(), id: []byte("nccl-id"), joined: map[int]device.World{}}
		plans := []*planner.Plan{hostProgram(t, 0, 2), hostProgram(t, 1, 2), hostProgram(t, 2, 2)}
		w, err := executor.OpenWorld(t.Context(), lib, plans)
		require.NoError(t, err)
		defer w.Close()
		for r := range 3 {
			assert.Equal(t, device.World{Rank: r, Size: 3, UniqueID: []byte("nccl-id")}, lib.joined[r])
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		err = w.Run(ctx)
		require.NoError(t, ctx.Err())
		assert.ErrorContains(t, err, `rank 2: op "step": out of memory`)
	})
	t.Run("as processes", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		libs := make([]*libBackend, 2)
		ranks := make([]*executor.Rank, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			libs[r] = &libBackend{Backend: cpu.New(), id: []byte("id of rank " + strconv.Itoa(r)), joined: map[int]device.World{}}
			wg.Go(func() {
				place, err := comm.Explicit(r, 2, func(k string) string {
					if k == "DAGRUN_PORT" {
						return port
					}
					return ""
				})
				require.NoError(t, err)
				opts := []executor.Option{executor.WithRankTimeout(time.Minute)}
				if r == 0 {
					opts = append(opts, executor.WithRendezvousListener(ln))
				}
				ranks[r], errs[r] = executor.JoinWorld(t.Context(), libs[r], hostProgram(t, r, 1), place, opts...)
			})
		}
		wg.Wait()
		for r := range 2 {
			require.NoError(t, errs[r])
			assert.Equal(t, []byte("id of rank 0"), libs[r].joined[r].UniqueID, "rank %d has rank 0's id", r)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		for r := range 2 {
			wg.Go(func() { errs[r] = ranks[r].Run(ctx) })
		}
		wg.Wait()
		require.NoError(t, ctx.Err(), "rank 0 waited for the failed rank")
		assert.ErrorContains(t, errs[1], `op "step": out of memory`)
		assert.ErrorIs(t, errs[0], comm.ErrAborted)
		assert.ErrorContains(t, errs[0], "rank 1 failed")
		for r := range 2 {
			wg.Go(func() { ranks[r].Close() })
		}
		wg.Wait()
	})
}
