package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
)

// TestWorldProcesses runs the data-parallel program as 2 and as 4
// processes (this test binary again, one process per rank, joined over
// TCP as torchrun would start them) and checks that every rank's buffers
// equal those of the same world run in one process.
func TestWorldProcesses(t *testing.T) {
	if os.Getenv("DAGRUN_TEST_RANK_OUT") != "" {
		rankProcess(t)
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("a rank dies", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		require.NoError(t, ln.Close())
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var outs [2]bytes.Buffer
		cmds := make([]*exec.Cmd, 2)
		for r := range 2 {
			c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorldProcesses$", "-test.count=1")
			c.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "DAGRUN_PORT="+port,
				"DAGRUN_TEST_RANK_OUT="+t.TempDir(), "DAGRUN_TEST_RANK_DIES=1")
			c.Stdout, c.Stderr = &outs[r], &outs[r]
			require.NoError(t, c.Start())
			cmds[r] = c
		}
		start := time.Now()
		err0, err1 := cmds[0].Wait(), cmds[1].Wait()
		require.Error(t, err1, "rank 1 exits")
		require.Error(t, err0, "rank 0 fails:\n%s", outs[0].String())
		assert.Contains(t, outs[0].String(), "rank 1 failed: its connection broke")
		assert.Less(t, time.Since(start), 30*time.Second, "rank 0 waited out its timeout")
	})
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			progs, plans := programs(t, n, nil)
			w, err := executor.OpenWorld(t.Context(), cpu.New(), plans)
			require.NoError(t, err)
			defer w.Close()
			require.NoError(t, w.Run(t.Context()))

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			require.NoError(t, ln.Close())
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmds := make([]*exec.Cmd, n)
			outs := make([]bytes.Buffer, n)
			for r := range n {
				c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorldProcesses$", "-test.count=1")
				c.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "LOCAL_RANK="+strconv.Itoa(r),
					"MASTER_ADDR=127.0.0.1", "DAGRUN_PORT="+port, "DAGRUN_TEST_RANK_OUT="+dir)
				c.Stdout, c.Stderr = &outs[r], &outs[r]
				require.NoError(t, c.Start())
				cmds[r] = c
			}
			for r, c := range cmds {
				require.NoError(t, c.Wait(), "rank %d:\n%s", r, outs[r].String())
			}
			for r := range n {
				p := progs[r]
				for _, buf := range []*dag.Buffer{p.g, p.avg, p.all, p.got, p.aux} {
					want, err := w.Read(r, buf)
					require.NoError(t, err)
					got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.%s", r, buf.Name)))
					require.NoError(t, err)
					assert.Equal(t, want, got, "rank %d buffer %s", r, buf.Name)
				}
			}
		})
	}
}

// rankProcess is one rank of TestWorldProcesses: it finds its place as
// torchrun's variables give it, runs the program twice and writes its
// buffers.
func rankProcess(t *testing.T) {
	place, ok, err := comm.Discover(os.Getenv)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "torchrun", place.Launcher)
	var dies func(rank int, b *dag.Builder, g *dag.Buffer)
	timeout := 30 * time.Second
	if os.Getenv("DAGRUN_TEST_RANK_DIES") != "" {
		// Rank 1's process exits in the middle of its run, as a crash
		// would end it; rank 0 waits in the all-reduce meanwhile.
		dies = func(rank int, b *dag.Builder, g *dag.Buffer) {
			h := b.Buffer("h", 8, dag.PinnedHost(), dag.Zeros())
			b.Host(func(context.Context, [][]byte) error {
				if rank == 1 {
					os.Exit(3)
				}
				return nil
			}, dag.InOut(h.All()), dag.Name("crash"))
		}
		timeout = 5 * time.Minute
	}
	p := newRankProgram(t, place.Rank, place.World, func(b *dag.Builder, g *dag.Buffer) {
		if dies != nil {
			dies(place.Rank, b, g)
		}
	})
	rk, err := executor.JoinWorld(t.Context(), cpu.New(), p.plan, place, executor.WithRankTimeout(timeout))
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, rk.Run(t.Context()))
	}
	dir := os.Getenv("DAGRUN_TEST_RANK_OUT")
	for _, buf := range []*dag.Buffer{p.g, p.avg, p.all, p.got, p.aux} {
		data, err := rk.Session().Read(buf)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.%s", place.Rank, buf.Name)), data, 0o644))
	}
	require.NoError(t, rk.Close())
}
