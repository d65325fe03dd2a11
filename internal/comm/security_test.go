package comm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// stranger is someone who reaches rank 0's port without the secret.
type stranger struct {
	c     net.Conn
	rd    *bufio.Reader
	nonce []byte // rank 0's challenge
}

func dialStranger(t *testing.T, addr string) *stranger {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	s := &stranger{c: c, rd: bufio.NewReader(c), nonce: make([]byte, nonceLen)}
	require.NoError(t, readChallenge(c, s.rd, s.nonce, time.Now().Add(5*time.Second)))
	return s
}

// hello sends a hello keyed with secret claiming rank of world.
func (s *stranger) hello(t *testing.T, secret string, rank, world int) {
	t.Helper()
	nonce := bytes.Repeat([]byte{7}, nonceLen)
	l := newLink(sessionKey([]byte(secret), s.nonce, nonce), false)
	hj, _ := json.Marshal(hello{Magic: magic, Rank: rank, World: world, Hash: SequenceHash(nil)})
	require.NoError(t, l.write(s.c, header{kind: kindHello}, append(nonce, hj...)))
	require.NoError(t, writeJSON(s.c, l, kindSequence, []string{}))
}

// silence checks that rank 0 closed the connection without a word.
func (s *stranger) silence(t *testing.T) {
	t.Helper()
	b, err := io.ReadAll(s.rd)
	assert.Empty(t, b, "rank 0 answered a stranger")
	if err != nil {
		assert.NotContains(t, err.Error(), "timeout", "rank 0 kept a stranger's connection open")
	}
}

func secretWorld(t *testing.T, ln net.Listener, secret func(r int) string, timeout time.Duration, before func()) ([]*Comm, []error) {
	t.Helper()
	comms := make([]*Comm, 2)
	var once sync.Once
	errs := onRanks(2, func(r int) error {
		cfg := Config{Place: Place{Rank: r, World: 2, Addr: ln.Addr().String(), Secret: Secret(secret(r))}, Options: Options{Timeout: timeout}}
		if r == 0 {
			cfg.Listener = ln
		} else {
			once.Do(before)
		}
		var err error
		comms[r], err = Rendezvous(t.Context(), cfg)
		return err
	})
	return comms, errs
}

func TestStrangersCannotJoin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		greet func(t *testing.T, s *stranger)
	}{
		{"wrong secret claims rank 1", func(t *testing.T, s *stranger) { s.hello(t, "guess", 1, 2) }},
		{"no secret claims rank 1", func(t *testing.T, s *stranger) { s.hello(t, "", 1, 2) }},
		{"another world size", func(t *testing.T, s *stranger) { s.hello(t, "guess", 1, 3) }},
		{"the old protocol's hello", func(t *testing.T, s *stranger) {
			b, _ := json.Marshal(map[string]any{"Magic": "dagrun-comm/1", "Rank": 1, "World": 2})
			hb := encodeHeader(header{kind: kindHello, length: uint64(len(b))})
			s.c.Write(append(hb[:], b...))
		}},
		{"a huge claim", func(t *testing.T, s *stranger) {
			hb := encodeHeader(header{kind: kindHello, length: 64 << 20})
			s.c.Write(hb[:])
		}},
		{"garbage", func(t *testing.T, s *stranger) { s.c.Write(bytes.Repeat([]byte{0xff}, 200)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			comms, errs := secretWorld(t, ln, func(int) string { return "s3cret" }, 5*time.Second, func() {
				s := dialStranger(t, ln.Addr().String())
				tc.greet(t, s)
				s.silence(t)
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			// The real ranks' average is theirs alone.
			errs = onRanks(2, func(r int) error {
				buf := f32bytes(float32(r + 1))
				if err := comms[r].AllReduce(t.Context(), buf, dag.F32, dag.Avg); err != nil {
					return err
				}
				if got := math.Float32frombits(uint32(buf[0]) | uint32(buf[1])<<8 | uint32(buf[2])<<16 | uint32(buf[3])<<24); got != 1.5 {
					return fmt.Errorf("rank %d: average %v, want 1.5", r, got)
				}
				return nil
			})
			for r, err := range errs {
				assert.NoError(t, err, "rank %d", r)
			}
			closeAll(t, comms)
		})
	}
}

func f32bytes(v float32) []byte {
	u := math.Float32bits(v)
	return []byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)}
}

func TestSecretMismatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, errs := secretWorld(t, ln, func(r int) string { return fmt.Sprint("secret", r) }, time.Second, func() {})
	require.Error(t, errs[0])
	assert.Contains(t, errs[0].Error(), "rank 1 of 2 did not reach the rendezvous")
	assert.Contains(t, errs[0].Error(), "1 connection failed authentication (is DAGRUN_SECRET the same on every rank?)")
	require.Error(t, errs[1])
	assert.Contains(t, errs[1].Error(), "is DAGRUN_SECRET the same on every rank?")
	assert.NotContains(t, errs[0].Error()+errs[1].Error(), "secret0")
}

// A rank can speak only for itself: rank 0 takes a frame's sender from the
// connection it came on.
func TestSenderIsTheConnection(t *testing.T) {
	comms, errs := tcpWorld(t, 3, 5*time.Second, nil)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	defer func() {
		for _, c := range comms {
			c.Abort(nil)
			c.Close()
		}
	}()
	tr := comms[1].tr.(*tcpTransport)
	require.NoError(t, tr.conns[0].write(header{from: 2, to: 0, kind: kindColl}, []byte("forged"), time.Second))
	require.Eventually(t, func() bool { return comms[0].box.pending(collChannel)[1] == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int{0, 1, 0}, comms[0].box.pending(collChannel))
}

func TestLinkRefusesForgedReplayedReflected(t *testing.T) {
	key := sessionKey([]byte("k"), bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen))
	frames := func(n int) []byte {
		var b bytes.Buffer
		w := newLink(key, false)
		for i := range n {
			require.NoError(t, w.write(&b, header{from: 1, kind: kindColl}, []byte{byte(i)}))
		}
		return b.Bytes()
	}
	two := frames(2)
	one := len(two) / 2
	for _, tc := range []struct {
		name string
		data []byte
		root bool // the reader is rank 0
		ok   int  // frames read before the error
	}{
		{"in order", two, true, 2},
		{"replayed", append(slices(two[:one]), two[:one]...), true, 1},
		{"reordered", append(slices(two[one:]), two[:one]...), true, 0},
		{"reflected", two, false, 0},
		{"tampered", func() []byte { b := slices(two); b[headerLen] ^= 1; return b }(), true, 0},
		{"sender rewritten", func() []byte { b := slices(two); b[0] = 2; return b }(), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLink(key, tc.root)
			rd := bufio.NewReader(bytes.NewReader(tc.data))
			n := 0
			var err error
			for err == nil {
				if _, _, err = l.read(rd, 1<<10); err == nil {
					n++
				}
			}
			assert.Equal(t, tc.ok, n)
			if tc.ok < 2 {
				assert.ErrorIs(t, err, errAuth)
			}
		})
	}
}

func slices(b []byte) []byte { return append([]byte(nil), b...) }

// Rank 0 listens only at MASTER_ADDR: with 127.0.0.1, no other address of
// the machine (here IPv6 loopback) reaches it.
func TestListensOnlyAtMasterAddr(t *testing.T) {
	probe, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback")
	}
	probe.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Rendezvous(t.Context(), Config{Place: Place{Rank: 0, World: 2, Addr: addr}, Options: Options{Timeout: time.Second}})
		done <- err
	}()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	c, err := net.Dial("tcp", net.JoinHostPort("::1", port))
	if err == nil {
		c.Close()
	}
	assert.Error(t, err, "rank 0 accepted a connection on [::1] though MASTER_ADDR is 127.0.0.1")
	assert.Error(t, <-done)
}

// Connections beyond maxPending are turned away at once, and a silent
// connection is dropped long before the rendezvous times out.
func TestPendingConnectionsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	done := make(chan error, 1)
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// A timeout of 16 s gives silent connections 4 s for their hello: far
	// from the 1.5 s by which the ones beyond the bound must be gone, even
	// on a loaded machine.
	go func() {
		_, err := Rendezvous(ctx, Config{Place: Place{Rank: 0, World: 2, Addr: addr}, Listener: ln, Options: Options{Timeout: 16 * time.Second}})
		done <- err
	}()
	const n = maxPending + 20
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i], err = net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	closed := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(12 * time.Second))
			io.Copy(io.Discard, c)
			closed[i] = time.Since(start)
		})
	}
	wg.Wait()
	early := 0
	for _, d := range closed {
		if d < 1500*time.Millisecond {
			early++
		}
		assert.Less(t, d, 10*time.Second, "a silent connection was kept past its hello timeout")
	}
	assert.GreaterOrEqual(t, early, n-maxPending, "connections beyond the bound were kept")
	cancel()
	assert.Error(t, <-done)
}

func TestInboxBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	comms := make([]*Comm, 2)
	errs := onRanks(2, func(r int) error {
		cfg := Config{Place: Place{Rank: r, World: 2, Addr: ln.Addr().String()}, Options: Options{Timeout: 5 * time.Second, InboxBytes: 1 << 20}}
		if r == 0 {
			cfg.Listener = ln
		}
		var err error
		comms[r], err = Rendezvous(t.Context(), cfg)
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	// Rank 1 floods rank 0 with sends that no recv takes.
	for range 64 {
		if comms[1].Send(t.Context(), make([]byte, 64<<10), 0) != nil {
			break
		}
	}
	require.Eventually(t, func() bool { return comms[0].box.failed() != nil }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, comms[0].box.failed().Error(), "no collective or recv has taken (at most 1048576 are held)")
	for _, c := range comms {
		c.Close()
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	p, err := Explicit(0, 2, func(k string) string {
		return map[string]string{"MASTER_ADDR": "10.1.2.3", SecretEnv: "hunter2"}[k]
	})
	require.NoError(t, err)
	assert.Equal(t, Secret("hunter2"), p.Secret)
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		assert.NotContains(t, fmt.Sprintf(f, p), "hunter2", f)
		assert.NotContains(t, fmt.Sprintf(f, p), fmt.Sprintf("%x", "hunter2"), f)
	}
	assert.Empty(t, p.Warning())
	p.Secret = nil
	assert.Contains(t, p.Warning(), "DAGRUN_SECRET is not set")
	p.Addr = "127.0.0.1:29511"
	assert.Empty(t, p.Warning(), "one machine")
	assert.Empty(t, Place{Addr: "localhost:1", World: 2}.Warning())
}
