package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// onRanks runs fn for every rank on its own goroutine and returns the
// errors by rank.
func onRanks(n int, fn func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = fn(r) })
	}
	wg.Wait()
	return errs
}

func checkScript(t *testing.T, comms []*Comm) {
	t.Helper()
	w := len(comms)
	for _, dt := range dtypes {
		seed := uint64(w*10) + uint64(dt)
		got := make([][][]byte, w)
		errs := onRanks(w, func(r int) error {
			var err error
			got[r], err = runScript(t.Context(), comms[r], dt, seed)
			return err
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d, %s", r, dt)
		}
		want := reference(w, dt, seed)
		for r := range w {
			require.Len(t, got[r], len(want[r]))
			for k := range want[r] {
				assert.Equal(t, want[r][k], got[r][k], "%s: rank %d, step %d", dt, r, k)
			}
		}
	}
}

func TestLocalCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			comms, err := NewLocal(n, Options{Timeout: 10 * time.Second})
			require.NoError(t, err)
			checkScript(t, comms)
			for _, c := range comms {
				assert.NoError(t, c.Close())
			}
		})
	}
	_, err := NewLocal(0, Options{})
	assert.Error(t, err)
}

// tcpWorld joins n ranks over loopback TCP, each on its own goroutine.
func tcpWorld(t *testing.T, n int, timeout time.Duration, seqs func(r int) []string) ([]*Comm, []error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	comms := make([]*Comm, n)
	errs := onRanks(n, func(r int) error {
		cfg := Config{Place: Place{Rank: r, World: n, Addr: ln.Addr().String()}, Options: Options{Timeout: timeout}}
		if seqs != nil {
			cfg.Sequence = seqs(r)
		}
		if r == 0 {
			cfg.Listener = ln
			cfg.Payload = []byte("unique-id")
		}
		var err error
		comms[r], err = Rendezvous(t.Context(), cfg)
		return err
	})
	return comms, errs
}

func closeAll(t *testing.T, comms []*Comm) {
	errs := onRanks(len(comms), func(r int) error {
		if comms[r] == nil {
			return nil
		}
		return comms[r].Close()
	})
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
}

func TestTCPCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			seq := []string{"all_reduce g: 4 x f32, sum"}
			comms, errs := tcpWorld(t, n, 10*time.Second, func(int) []string { return seq })
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for _, c := range comms {
				assert.Equal(t, []byte("unique-id"), c.Payload())
			}
			checkScript(t, comms)
			closeAll(t, comms)
		})
	}
}

func TestRendezvousMissingRank(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	start := time.Now()
	errs := onRanks(2, func(r int) error { // ranks 0 and 1 of 4: 2 and 3 never come
		cfg := Config{Place: Place{Rank: r, World: 4, Addr: ln.Addr().String()}, Options: Options{Timeout: 500 * time.Millisecond}}
		if r == 0 {
			cfg.Listener = ln
		}
		_, err := Rendezvous(t.Context(), cfg)
		return err
	})
	assert.Less(t, time.Since(start), 5*time.Second)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.ErrorIs(t, err, ErrRendezvous)
		assert.Contains(t, err.Error(), "ranks 2, 3 of 4 did not reach the rendezvous")
	}
}

func TestRendezvousNoRankZero(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = Rendezvous(t.Context(), Config{Place: Place{Rank: 1, World: 2, Addr: addr}, Options: Options{Timeout: 300 * time.Millisecond}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrRendezvous)
	assert.Contains(t, err.Error(), "rank 0 did not answer at "+addr)
}

func TestRendezvousSequenceMismatch(t *testing.T) {
	comms, errs := tcpWorld(t, 3, 5*time.Second, func(r int) []string {
		s := []string{"all_reduce a: 4 x f32, sum", "all_gather b: 4 x f32 -> 12 x f32"}
		if r == 2 {
			s[1] = "broadcast b: 4 x f32, root 0"
		}
		return s
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.Nil(t, comms[r])
		assert.ErrorIs(t, err, ErrMismatch)
		assert.Contains(t, err.Error(), `differ at #2: rank 0 has "all_gather b: 4 x f32 -> 12 x f32", rank 2 has "broadcast b: 4 x f32, root 0"`)
	}
	err := CompareSequences([][]string{{"a"}, {"a", "b"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rank 0 has 1 collectives, rank 1 has more; its #2 is "b"`)
	assert.NoError(t, CompareSequences([][]string{{"a"}, {"a"}}))
}

func TestRendezvousWorldMismatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errs := onRanks(2, func(r int) error {
		cfg := Config{Place: Place{Rank: r, World: 2 + r, Addr: ln.Addr().String()}, Options: Options{Timeout: 2 * time.Second}}
		if r == 0 {
			cfg.Listener = ln
		}
		_, err := Rendezvous(t.Context(), cfg)
		return err
	})
	for _, err := range errs {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rank 1 says the world has 3 ranks, rank 0 says 2")
		assert.ErrorIs(t, err, ErrMismatch)
	}
}

func TestRendezvousDuplicateRank(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errs := onRanks(3, func(i int) error {
		r := min(i, 1) // ranks 0, 1 and 1 again of 3: the world never completes
		cfg := Config{Place: Place{Rank: r, World: 3, Addr: ln.Addr().String()}, Options: Options{Timeout: time.Second}}
		if i == 0 {
			cfg.Listener = ln
		}
		c, err := Rendezvous(t.Context(), cfg)
		if err == nil {
			defer c.Close()
		}
		return err
	})
	refused := 0
	for _, err := range errs {
		require.Error(t, err)
		if strings.Contains(err.Error(), "rank 1 already joined (two processes claim the same rank)") {
			refused++
		} else {
			assert.Contains(t, err.Error(), "rank 2 of 3 did not reach the rendezvous")
		}
	}
	assert.Equal(t, 1, refused, "one of the two rank 1s is refused: %v", errs)
}

// failMidRun checks that when rank 1 fails in the middle of a run, every
// other rank's pending all-reduce fails promptly with an error naming rank 1.
func failMidRun(t *testing.T, comms []*Comm, fail func(c *Comm)) {
	t.Helper()
	start := time.Now()
	errs := onRanks(len(comms), func(r int) error {
		buf := make([]byte, 64)
		if err := comms[r].AllReduce(t.Context(), buf, dag.F32, dag.Sum); err != nil {
			return err
		}
		if r == 1 {
			fail(comms[r])
			return nil
		}
		return comms[r].AllReduce(t.Context(), buf, dag.F32, dag.Sum)
	})
	assert.Less(t, time.Since(start), 5*time.Second, "the others must not wait out their timeout")
	for r, err := range errs {
		if r == 1 {
			continue
		}
		require.Error(t, err, "rank %d", r)
		assert.ErrorIs(t, err, ErrAborted)
		assert.Contains(t, err.Error(), "rank 1 failed")
	}
}

func TestAbortLocal(t *testing.T) {
	comms, err := NewLocal(3, Options{Timeout: time.Minute})
	require.NoError(t, err)
	failMidRun(t, comms, func(c *Comm) { c.Abort(errors.New("op \"k\": launch failed")) })
	err = comms[0].AllReduce(t.Context(), make([]byte, 4), dag.F32, dag.Sum)
	assert.ErrorIs(t, err, ErrAborted, "later calls fail too")
}

func TestAbortTCP(t *testing.T) {
	comms, errs := tcpWorld(t, 3, time.Minute, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	failMidRun(t, comms, func(c *Comm) { c.Abort(errors.New("op \"k\": launch failed")) })
	closeAll(t, comms)
}

func TestCrashTCP(t *testing.T) {
	comms, errs := tcpWorld(t, 3, time.Minute, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	// A crash: the process's connections close with nothing said.
	failMidRun(t, comms, func(c *Comm) { c.tr.(*tcpTransport).conns[0].c.Close() })
	closeAll(t, comms)
}

func TestTimeoutNamesTheRank(t *testing.T) {
	comms, err := NewLocal(2, Options{Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	err = comms[1].Broadcast(t.Context(), make([]byte, 8), 0) // rank 0 never calls
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "rank 1: broadcast: no data from rank 0 within 200ms")
	// Rank 1 gave up, so rank 0 learns of it at once.
	err = comms[0].Broadcast(t.Context(), make([]byte, 8), 0)
	assert.ErrorIs(t, err, ErrAborted)
}

func TestContextCancel(t *testing.T) {
	comms, err := NewLocal(2, Options{Timeout: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = comms[0].AllReduce(ctx, make([]byte, 8), dag.F32, dag.Sum)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestSizeMismatch(t *testing.T) {
	comms, err := NewLocal(2, Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	errs := onRanks(2, func(r int) error {
		return comms[r].AllReduce(t.Context(), make([]byte, 8*(r+1)), dag.F32, dag.Sum)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	assert.ErrorIs(t, errs[0], ErrMismatch)
	assert.Contains(t, errs[0].Error(), "rank 1's view holds 16 bytes, rank 0's 8")
	assert.ErrorIs(t, errs[1], ErrAborted)
}

func TestUnmatchedSend(t *testing.T) {
	comms, err := NewLocal(3, Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	errs := onRanks(3, func(r int) error {
		if r == 2 {
			if err := comms[r].Send(t.Context(), make([]byte, 4), 1); err != nil {
				return err
			}
		}
		return comms[r].Finish(t.Context())
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.ErrorIs(t, err, ErrUnmatched)
		assert.Contains(t, err.Error(), "1 from rank 2 to rank 1")
	}
}

func TestClosed(t *testing.T) {
	comms, err := NewLocal(1, Options{})
	require.NoError(t, err)
	require.NoError(t, comms[0].Close())
	assert.ErrorIs(t, comms[0].AllReduce(t.Context(), make([]byte, 4), dag.F32, dag.Sum), ErrClosed)
	assert.NoError(t, comms[0].Close())
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		ok      bool
		want    Place
		wantErr string
	}{
		{"none", map[string]string{}, false, Place{}, ""},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "node7", "MASTER_PORT": "29500"}, true,
			Place{Rank: 3, World: 4, LocalRank: 1, Launcher: "torchrun", Addr: "node7:29511"}, ""},
		{"slurm", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "MASTER_ADDR": "10.0.0.1", "DAGRUN_PORT": "4000"}, true,
			Place{Rank: 5, World: 8, LocalRank: 1, Launcher: "slurm", Addr: "10.0.0.1:4000"}, ""},
		{"openmpi inside slurm", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, true,
			Place{Rank: 1, World: 2, LocalRank: 1, Launcher: "openmpi", Addr: "127.0.0.1:29511"}, ""},
		{"torchrun under srun", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, true,
			Place{Rank: 0, World: 2, Launcher: "torchrun", Addr: "127.0.0.1:29511"}, ""},
		{"half set", map[string]string{"RANK": "1"}, false, Place{}, "RANK is set but WORLD_SIZE is not"},
		{"bad rank", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, false, Place{}, `RANK="x" is not a rank`},
		{"rank outside", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, false, Place{}, "rank 2 is not in a world of 2"},
		{"bad port", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "DAGRUN_PORT": "70000"}, false, Place{}, "DAGRUN_PORT"},
		{"bad local", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "-1"}, false, Place{}, "LOCAL_RANK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok, err := Discover(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.want, p)
			}
		})
	}
	p, err := Explicit(1, 2, func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, Place{Rank: 1, World: 2, LocalRank: 1, Launcher: "explicit", Addr: "127.0.0.1:" + strconv.Itoa(DefaultPort)}, p)
	_, err = Explicit(0, 0, func(string) string { return "" })
	assert.Error(t, err)
}

// A rank that stalls costs rank 0 one timeout, not one for the collective
// and another for Close: once the world has failed, nothing is left to
// forward and Close does not wait for the stalled rank.
func TestStalledRankOneTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	comms, errs := tcpWorld(t, 2, timeout, nil)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	defer comms[1].Close() // rank 1 stalls: it calls nothing until the end
	start := time.Now()
	err := comms[0].AllReduce(t.Context(), make([]byte, 8), dag.F32, dag.Sum)
	require.ErrorIs(t, err, ErrTimeout)
	comms[0].Close()
	assert.Less(t, time.Since(start), timeout+timeout/2, "rank 0 waited for the stalled rank again in Close")
}
