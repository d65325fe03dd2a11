package comm

// The TCP transport of a world after its rendezvous: a connection per rank
// to rank 0, authenticated frames (auth.go), and rank 0 passing messages
// between the others.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

type header struct {
	from, to int32
	kind     byte
	length   uint64
}

// tcpTransport carries one rank's messages. Rank 0 holds a connection to
// every other rank and forwards the messages between them; the others hold
// one connection, to rank 0.
type tcpTransport struct {
	rank, world int
	timeout     time.Duration
	conns       []*tconn
	box         *inbox
	closing     atomic.Bool
	readers     sync.WaitGroup
	// relaying counts the failures being passed on: close waits for them,
	// since the failure, once recorded, may end this rank's process.
	relaying sync.WaitGroup
}

type tconn struct {
	c   net.Conn
	rd  *bufio.Reader
	l   *link
	wmu sync.Mutex
	bye atomic.Bool // the peer closed its communicator
}

func (tc *tconn) write(h header, payload []byte, timeout time.Duration) error {
	tc.wmu.Lock()
	defer tc.wmu.Unlock()
	tc.c.SetWriteDeadline(time.Now().Add(timeout))
	return tc.l.write(tc.c, h, payload)
}

func startTCP(cfg Config, conns []net.Conn, readers []*bufio.Reader, links []*link) *Comm {
	box := newInbox(cfg.World)
	box.limitBytes, box.limitCount = cfg.inboxBytes(), maxQueuedMessages
	t := &tcpTransport{rank: cfg.Rank, world: cfg.World, timeout: cfg.timeout(), conns: make([]*tconn, cfg.World), box: box}
	for r, c := range conns {
		if c != nil {
			t.conns[r] = &tconn{c: c, rd: readers[r], l: links[r]}
			t.readers.Add(1)
			go t.read(r)
		}
	}
	return &Comm{rank: cfg.Rank, world: cfg.World, timeout: cfg.timeout(), box: box, tr: t}
}

// route is the connection a message to rank to leaves by.
func (t *tcpTransport) route(to int) *tconn {
	if t.rank == 0 {
		return t.conns[to]
	}
	return t.conns[0]
}

func (t *tcpTransport) send(to int, ch channel, data []byte) error {
	if to == t.rank {
		return t.box.put(to, ch, data)
	}
	return t.route(to).write(header{from: int32(t.rank), to: int32(to), kind: byte(ch)}, data, t.timeout)
}

func (t *tcpTransport) abort(msg string) {
	for r, c := range t.conns {
		if c != nil && r != t.rank {
			c.write(header{from: int32(t.rank), to: int32(r), kind: kindAbort}, []byte(msg), min(t.timeout, 5*time.Second))
		}
	}
}

// fail records that rank from failed with msg (as seen from rank, which
// is this one but for a forwarding failure) and, when relay is set, passes
// it on to every other rank.
func (t *tcpTransport) fail(rank, from int, msg string, relay bool) {
	if relay {
		t.relaying.Add(1)
		defer t.relaying.Done()
	}
	t.box.fail(abortError(rank, from, msg))
	if relay {
		t.relayAbort(from, msg)
	}
}

// relayAbort, on rank 0, passes rank from's failure on to every other rank.
func (t *tcpTransport) relayAbort(from int, msg string) {
	for r, c := range t.conns {
		if c != nil && r != from {
			c.write(header{from: int32(from), to: int32(r), kind: kindAbort}, []byte(msg), min(t.timeout, 5*time.Second))
		}
	}
}

// read takes the frames that arrive on the connection to rank peer. Every
// frame is authenticated before it has any effect. On rank 0 a frame's
// sender is the rank whose connection it came on, whatever its header
// says; the other ranks hear only from rank 0, which names the sender of
// what it forwards.
func (t *tcpTransport) read(peer int) {
	defer t.readers.Done()
	tc := t.conns[peer]
	for {
		h, payload, err := tc.l.read(tc.rd, maxFrame)
		if err == nil && t.rank == 0 {
			h.from = int32(peer)
		}
		if err == nil && (h.from < 0 || int(h.from) >= t.world || h.to < 0 || int(h.to) >= t.world) {
			err = fmt.Errorf("a message from rank %d to rank %d", h.from, h.to)
		}
		from, to := int(h.from), int(h.to)
		if err == nil && (h.kind == kindColl || h.kind == kindP2P) && to == t.rank {
			if err = t.box.put(from, channel(h.kind), payload); err != nil {
				msg := err.Error()
				t.fail(t.rank, from, msg, true)
				tc.c.Close()
				return
			}
			continue
		}
		if err != nil {
			if tc.bye.Load() || t.closing.Load() {
				if t.rank == 0 {
					tc.c.Close() // the peer is done: nothing more goes to it
				}
				return
			}
			msg := fmt.Sprintf("its connection broke (%v): the process exited or the network failed", reason(err))
			if errors.Is(err, errAuth) {
				msg = fmt.Sprintf("a frame on its connection failed authentication (%s differs, or the connection was tampered with)", SecretEnv)
			}
			t.fail(t.rank, peer, msg, t.rank == 0)
			tc.c.Close()
			return
		}
		switch h.kind {
		case kindColl, kindP2P:
			if t.rank == 0 && t.conns[to] != nil {
				if err := t.conns[to].write(h, payload, t.timeout); err != nil {
					msg := fmt.Sprintf("rank 0 could not pass a message to rank %d on: %v", to, reason(err))
					t.fail(0, to, msg, true)
				}
			}
		case kindAbort:
			t.fail(t.rank, from, string(payload), t.rank == 0)
		case kindBye:
			tc.bye.Store(true)
			t.box.leave(from)
		}
	}
}

// close says goodbye and waits (up to the timeout) for the connections to
// wind down: rank 0 keeps forwarding until every other rank said goodbye.
// A world that has failed has nothing left to forward: close does not wait
// then, so that a stalled rank costs one timeout, not a second one here.
func (t *tcpTransport) close() error {
	t.relaying.Wait() // each write is bounded by its own timeout
	t.closing.Store(t.rank != 0)
	var errs []error
	if t.rank != 0 {
		tc := t.conns[0]
		if err := tc.write(header{from: int32(t.rank), kind: kindBye}, nil, min(t.timeout, 5*time.Second)); err != nil && t.box.failed() == nil {
			errs = append(errs, err)
		}
		if cw, ok := tc.c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
	done := make(chan struct{})
	go func() { t.readers.Wait(); close(done) }()
	wait := t.timeout
	if t.box.failed() != nil {
		wait = 0
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.closing.Store(true)
		if wait > 0 {
			errs = append(errs, fmt.Errorf("rank %d: close: ranks still running after %s", t.rank, t.timeout))
		}
	}
	t.closing.Store(true)
	for _, c := range t.conns {
		if c != nil {
			c.c.Close()
		}
	}
	<-done
	return errors.Join(errs...)
}

// readPayload reads n bytes. Up to 64 MiB are allocated at once; beyond,
// memory grows only as the bytes arrive, so that a broken peer's claim of
// a huge message cannot make this rank allocate it.
func readPayload(r io.Reader, n uint64) ([]byte, error) {
	const eager = 64 << 20
	if n <= eager {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	buf.Grow(eager)
	got, err := io.CopyN(&buf, r, int64(n))
	if err == io.EOF && uint64(got) < n {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}
