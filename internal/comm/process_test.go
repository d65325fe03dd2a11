package comm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// The test binary re-executes itself as the ranks of a world: a child finds
// its place through torchrun's variables, runs the script for every dtype,
// checks it against the reference and exits 0, or prints why and exits 1.
// DAGRUN_COMM_CHILD says what the child does: "script" or "crash" (rank 1
// exits after its first all-reduce, as a crashing process does).
func TestMain(m *testing.M) {
	if mode := os.Getenv("DAGRUN_COMM_CHILD"); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(mode string) error {
	p, ok, err := Discover(os.Getenv)
	if err != nil || !ok {
		return fmt.Errorf("discover: ok %v, %v", ok, err)
	}
	ctx := context.Background()
	c, err := Rendezvous(ctx, Config{Place: p, Sequence: []string{"script"}, Payload: []byte("id"), Options: Options{Timeout: 20 * time.Second}})
	if err != nil {
		return err
	}
	defer c.Close()
	if !bytes.Equal(c.Payload(), []byte("id")) {
		return fmt.Errorf("payload %q", c.Payload())
	}
	switch mode {
	case "script":
		for _, dt := range dtypes {
			seed := uint64(77) + uint64(dt)
			got, err := runScript(ctx, c, dt, seed)
			if err != nil {
				return err
			}
			want := reference(c.World(), dt, seed)[c.Rank()]
			for k := range want {
				if !bytes.Equal(got[k], want[k]) {
					return fmt.Errorf("rank %d, %s, step %d: got %x, want %x", c.Rank(), dt, k, got[k], want[k])
				}
			}
		}
		return nil
	case "crash":
		buf := make([]byte, 16)
		start := time.Now()
		err := c.AllReduce(ctx, buf, dag.F32, dag.Sum)
		if c.Rank() == 1 {
			os.Exit(3) // no goodbye: the others must notice at once
		}
		// Rank 1 may exit while rank 0 still passes the first result on,
		// so the failure can surface in either all-reduce.
		if err == nil {
			start = time.Now()
			err = c.AllReduce(ctx, buf, dag.F32, dag.Sum)
		}
		if err == nil {
			return fmt.Errorf("rank %d: all_reduce after rank 1 crashed succeeded", c.Rank())
		}
		return fmt.Errorf("after %.1fs: %w", time.Since(start).Seconds(), err)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// startRanks runs n children and returns each one's exit error and output.
func startRanks(t *testing.T, n int, mode string) ([]error, []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // the child of rank 0 listens on it; a race with another process is unlikely
	errs := make([]error, n)
	outs := make([]string, n)
	var wg sync.WaitGroup
	for r := range n {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DAGRUN_COMM_CHILD="+mode, "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "MASTER_ADDR=127.0.0.1", "DAGRUN_PORT="+port)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		wg.Go(func() {
			errs[r] = cmd.Wait()
			outs[r] = out.String()
		})
	}
	wg.Wait()
	return errs, outs
}

func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, n := range []int{2, 4, 8} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			errs, outs := startRanks(t, n, "script")
			for r := range n {
				assert.NoError(t, errs[r], "rank %d: %s", r, outs[r])
			}
		})
	}
}

func TestProcessCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, n := range []int{3, 8} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			errs, outs := startRanks(t, n, "crash")
			for r := range n {
				require.Error(t, errs[r], "rank %d", r)
				if r == 1 {
					continue
				}
				assert.Contains(t, outs[r], "rank 1 failed", "rank %d", r)
				assert.Regexp(t, `^after [0-4]\.\d+s`, outs[r], "rank %d fails promptly", r)
			}
		})
	}
}
