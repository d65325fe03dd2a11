package comm

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// squat holds n silent connections to addr, each opened again as soon as
// rank 0 drops it, until the test ends; it returns the count of
// connections opened so far.
func squat(t *testing.T, addr string, n int) *atomic.Int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var opened atomic.Int64
	var d net.Dialer
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				opened.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				io.Copy(io.Discard, c) // silent until rank 0 drops it
				stop()
				c.Close()
			}
		})
	}
	return &opened
}

// Connections that open and say nothing, from the ranks' own address and
// opened again as soon as they are dropped, do not keep a rank out.
func TestSquattersCannotHoldTheDoor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	opened := squat(t, addr, 80)
	const timeout = 20 * time.Second
	comms := make([]*Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		comms[0], errs[0] = Rendezvous(t.Context(), Config{Place: Place{Rank: 0, World: 2, Addr: addr, Secret: Secret("s3cret")},
			Listener: ln, Options: Options{Timeout: timeout}})
	})
	// The door is full and churning before rank 1 comes.
	require.Eventually(t, func() bool { return opened.Load() > 4*maxPending }, 10*time.Second, 5*time.Millisecond)
	start := time.Now()
	before := opened.Load()
	comms[1], errs[1] = Rendezvous(t.Context(), Config{Place: Place{Rank: 1, World: 2, Addr: addr, Secret: Secret("s3cret")},
		Options: Options{Timeout: timeout}})
	took := time.Since(start)
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	t.Logf("a world of 2 formed in %s while 80 squatters opened %d connections", took.Round(time.Millisecond), opened.Load()-before)
	errs = onRanks(2, func(r int) error {
		return comms[r].AllReduce(t.Context(), f32bytes(1), dag.F32, dag.Sum)
	})
	for r, err := range errs {
		assert.NoError(t, err, "rank %d", r)
	}
	closeAll(t, comms)
}

// Rank 0's timeout says that silent connections came and went.
func TestSquattersNamedInTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	squat(t, ln.Addr().String(), 80)
	_, err = Rendezvous(t.Context(), Config{Place: Place{Rank: 0, World: 2, Addr: ln.Addr().String()}, Listener: ln, Options: Options{Timeout: time.Second}})
	require.ErrorIs(t, err, ErrRendezvous)
	assert.Regexp(t, `rank 1 of 2 did not reach the rendezvous .*; \d+ connections stayed silent and were dropped \(is something else holding connections to 127\.0\.0\.1:\d+ open\?\)$`, err.Error())
}

// A rank that rank 0 keeps turning away says so, not "connection refused".
func TestTurnedAwayNamedInTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			answerBusy(c)
		}
	}()
	_, err = Rendezvous(t.Context(), Config{Place: Place{Rank: 1, World: 2, Addr: ln.Addr().String()}, Options: Options{Timeout: 500 * time.Millisecond}})
	require.ErrorIs(t, err, ErrRendezvous)
	assert.Regexp(t, `^rank 1: rendezvous: rank 0 at 127\.0\.0\.1:\d+ turned this rank away \d+ times within 500ms: it had no room among connections that did not say who they are \(is something else holding connections to rank 0's port open\?\)$`, err.Error())
}

// flakyListener fails its first Accepts as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &flakyListener{Listener: ln}
	fl.fails.Store(5)
	comms, errs := secretWorld(t, fl, func(int) string { return "s3cret" }, 10*time.Second, func() {})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	closeAll(t, comms)

	// A listener that keeps failing: the timeout says why.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl = &flakyListener{Listener: ln}
	fl.fails.Store(1 << 30)
	_, err = Rendezvous(t.Context(), Config{Place: Place{Rank: 0, World: 2, Addr: ln.Addr().String()}, Listener: fl, Options: Options{Timeout: 300 * time.Millisecond}})
	require.ErrorIs(t, err, ErrRendezvous)
	assert.Contains(t, err.Error(), "; accepting connections failed: accept tcp 127.0.0.1:")
	assert.Contains(t, err.Error(), "too many open files")
}
