package comm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config says how one process joins a world over TCP.
type Config struct {
	Place             // Rank, World and Addr (host:port of rank 0)
	Sequence []string // this rank's collective sequence (dag.Graph.CollectiveSequence)
	// Payload is what rank 0 hands every rank (the NCCL unique id); at most
	// maxHello bytes. Other ranks leave it nil.
	Payload []byte
	// Listener, on rank 0, is the listener to use instead of listening on
	// Addr's port on every interface (tests pass one on a free port).
	Listener net.Listener
	Options
}

const (
	kindColl    = byte(collChannel)
	kindP2P     = byte(p2pChannel)
	kindAbort   = 2
	kindBye     = 3
	kindHello   = 4
	kindWelcome = 5

	headerLen = 17
	maxHello  = 64 << 20 // bytes of a hello or welcome frame
	maxFrame  = 1 << 36  // bytes of one message: larger claims are a broken peer
	magic     = "dagrun-comm/1"
)

type hello struct {
	Magic    string
	Rank     int
	World    int
	Hash     string
	Sequence []string
}

type welcome struct {
	Err      string
	Mismatch bool // Err is an ErrMismatch: the ranks disagree
	Payload  []byte
}

// Rendezvous joins the world that cfg describes: rank 0 listens and waits
// for every other rank (up to the timeout), checks that they agree on the
// world and on the collective sequence, and hands them its payload; the
// others connect to rank 0 (retrying until the timeout, so the ranks may
// start in any order). The error names the ranks that did not arrive, or
// the first collective the ranks disagree on.
func Rendezvous(ctx context.Context, cfg Config) (*Comm, error) {
	p := cfg.Place
	if p.World < 1 || p.Rank < 0 || p.Rank >= p.World {
		return nil, &Error{Rank: p.Rank, Op: "rendezvous", Peer: -1, Msg: fmt.Sprintf("rank %d is not in a world of %d", p.Rank, p.World), Err: ErrRendezvous}
	}
	if len(cfg.Payload) > maxHello/2 {
		return nil, &Error{Rank: p.Rank, Op: "rendezvous", Peer: -1, Msg: fmt.Sprintf("payload of %d bytes is too large", len(cfg.Payload)), Err: ErrRendezvous}
	}
	if p.World == 1 {
		cs, _ := NewLocal(1, cfg.Options)
		cs[0].payload = cfg.Payload
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return cs[0], nil
	}
	if p.Rank == 0 {
		return rendezvousRoot(ctx, cfg)
	}
	return rendezvousPeer(ctx, cfg)
}

func rendezvousErr(rank, peer int, sentinel error, format string, a ...any) *Error {
	return &Error{Rank: rank, Op: "rendezvous", Peer: peer, Msg: fmt.Sprintf(format, a...), Err: sentinel}
}

type arrival struct {
	conn net.Conn
	rd   *bufio.Reader
	h    hello
	err  error
}

func rendezvousRoot(ctx context.Context, cfg Config) (*Comm, error) {
	timeout := cfg.timeout()
	ln := cfg.Listener
	if ln == nil {
		_, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			return nil, rendezvousErr(0, -1, ErrRendezvous, "address %q: %v", cfg.Addr, err)
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort("", port)); err != nil {
			return nil, rendezvousErr(0, -1, ErrRendezvous, "listening on port %s: %v (set DAGRUN_PORT to a free port)", port, err)
		}
	}
	defer ln.Close()
	where := ln.Addr().String()
	start := time.Now()
	deadline := start.Add(timeout)
	arrivals := make(chan arrival)
	stop := make(chan struct{})
	var acceptors sync.WaitGroup
	var pmu sync.Mutex
	pending := map[net.Conn]bool{} // connections whose hello is being read
	acceptors.Add(1)
	go func() {
		defer acceptors.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // the listener is closed when the rendezvous ends
			}
			pmu.Lock()
			pending[conn] = true
			pmu.Unlock()
			acceptors.Add(1)
			go func() {
				defer acceptors.Done()
				a := arrival{conn: conn, rd: bufio.NewReader(conn)}
				conn.SetReadDeadline(deadline)
				a.err = readJSON(a.rd, kindHello, &a.h)
				pmu.Lock()
				delete(pending, conn)
				conn.SetReadDeadline(time.Time{})
				pmu.Unlock()
				select {
				case arrivals <- a:
				case <-stop:
					conn.Close()
				}
			}()
		}
	}()
	conns := make([]net.Conn, cfg.World)
	readers := make([]*bufio.Reader, cfg.World)
	seqs := make([][]string, cfg.World)
	seqs[0] = cfg.Sequence
	arrived := 1
	var failure error
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	report := time.NewTicker(WaitReport)
	defer report.Stop()
	for arrived < cfg.World && failure == nil {
		select {
		case <-report.C:
			if cfg.Waiting != nil {
				var missing []int
				for r := 1; r < cfg.World; r++ {
					if conns[r] == nil {
						missing = append(missing, r)
					}
				}
				cfg.Waiting(missing, time.Since(start))
			}
		case a := <-arrivals:
			h := a.h
			switch {
			case a.err != nil:
				a.conn.Close() // not a dagrun rank, or one that gave up: ignore it
				continue
			case h.Magic != magic:
				refuse(a.conn, fmt.Sprintf("protocol %q, rank 0 speaks %q (run the same dagrun on every rank)", h.Magic, magic))
				continue
			case h.Rank <= 0 || h.Rank >= cfg.World:
				refuse(a.conn, fmt.Sprintf("rank %d is not in rank 0's world of %d", h.Rank, cfg.World))
				continue
			case conns[h.Rank] != nil:
				refuse(a.conn, fmt.Sprintf("rank %d already joined (two processes claim the same rank)", h.Rank))
				continue
			}
			conns[h.Rank], readers[h.Rank], seqs[h.Rank] = a.conn, a.rd, h.Sequence
			arrived++
			if h.World != cfg.World {
				failure = rendezvousErr(0, h.Rank, ErrMismatch, "rank %d says the world has %d ranks, rank 0 says %d", h.Rank, h.World, cfg.World)
			} else if h.Hash != SequenceHash(h.Sequence) {
				failure = rendezvousErr(0, h.Rank, ErrMismatch, "rank %d sent a sequence that does not match its hash", h.Rank)
			}
		case <-timer.C:
			var missing []string
			for r := 1; r < cfg.World; r++ {
				if conns[r] == nil {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			failure = rendezvousErr(0, -1, ErrRendezvous, "rank%s %s of %d did not reach the rendezvous at %s within %s (are they running, with MASTER_ADDR and DAGRUN_PORT pointing at rank 0?)",
				plural(len(missing)), strings.Join(missing, ", "), cfg.World, where, timeout)
		case <-ctx.Done():
			failure = rendezvousErr(0, -1, ctx.Err(), "%v", ctx.Err())
		}
	}
	close(stop)
	ln.Close()
	pmu.Lock()
	for c := range pending {
		c.SetReadDeadline(time.Now()) // a hello still coming is too late
	}
	pmu.Unlock()
	if failure == nil {
		failure = CompareSequences(seqs)
	}
	w := welcome{Payload: cfg.Payload}
	if failure != nil {
		w = welcome{Err: failure.Error(), Mismatch: errors.Is(failure, ErrMismatch)}
	}
	for r, c := range conns {
		if c == nil {
			continue
		}
		c.SetWriteDeadline(time.Now().Add(timeout))
		if err := writeJSON(c, kindWelcome, w); err != nil && failure == nil {
			failure = rendezvousErr(0, r, ErrRendezvous, "rank %d left during the rendezvous: %v", r, err)
		}
		c.SetWriteDeadline(time.Time{})
	}
	acceptors.Wait()
	if failure != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, failure
	}
	cm := startTCP(cfg, conns, readers)
	cm.payload = cfg.Payload
	return cm, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func refuse(c net.Conn, msg string) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	writeJSON(c, kindWelcome, welcome{Err: "rank 0 refused: " + msg})
	c.Close()
}

func rendezvousPeer(ctx context.Context, cfg Config) (*Comm, error) {
	timeout := cfg.timeout()
	deadline := time.Now().Add(timeout)
	if cfg.Waiting != nil {
		start := time.Now()
		report := time.NewTicker(WaitReport)
		done := make(chan struct{})
		defer func() { report.Stop(); close(done) }()
		go func() {
			for {
				select {
				case <-report.C:
					cfg.Waiting([]int{0}, time.Since(start))
				case <-done:
					return
				}
			}
		}()
	}
	var conn net.Conn
	var last error
	d := net.Dialer{}
	for conn == nil {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, "rank 0 did not answer at %s within %s: %v (is it running? MASTER_ADDR and DAGRUN_PORT must name it)",
				cfg.Addr, timeout, last)
		}
		dctx, cancel := context.WithTimeout(ctx, left)
		c, err := d.DialContext(dctx, "tcp", cfg.Addr)
		cancel()
		if err == nil {
			conn = c
			break
		}
		last = err
		if ctx.Err() != nil {
			return nil, rendezvousErr(cfg.Rank, 0, ctx.Err(), "%v", ctx.Err())
		}
		select {
		case <-time.After(min(100*time.Millisecond, max(left, 0))):
		case <-ctx.Done():
			return nil, rendezvousErr(cfg.Rank, 0, ctx.Err(), "%v", ctx.Err())
		}
	}
	fail := func(format string, a ...any) (*Comm, error) {
		conn.Close()
		return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, format, a...)
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	h := hello{Magic: magic, Rank: cfg.Rank, World: cfg.World, Hash: SequenceHash(cfg.Sequence), Sequence: cfg.Sequence}
	if err := writeJSON(conn, kindHello, h); err != nil {
		return fail("sending to rank 0 at %s: %v", cfg.Addr, err)
	}
	conn.SetWriteDeadline(time.Time{})
	// Rank 0 answers when every rank is in, or at its own timeout, which
	// started before this rank connected.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	conn.SetReadDeadline(time.Now().Add(timeout + 5*time.Second))
	rd := bufio.NewReader(conn)
	var w welcome
	if err := readJSON(rd, kindWelcome, &w); err != nil {
		if ctx.Err() != nil {
			return fail("%v", ctx.Err())
		}
		return fail("rank 0 at %s did not let this rank in: %v", cfg.Addr, err)
	}
	conn.SetReadDeadline(time.Time{})
	if w.Err != "" {
		conn.Close()
		var sentinel error = ErrRendezvous
		if w.Mismatch {
			sentinel = ErrMismatch
		}
		return nil, rendezvousErr(cfg.Rank, 0, sentinel, "%s", w.Err)
	}
	conns := make([]net.Conn, cfg.World)
	readers := make([]*bufio.Reader, cfg.World)
	conns[0], readers[0] = conn, rd
	cm := startTCP(cfg, conns, readers)
	cm.payload = w.Payload
	return cm, nil
}

func writeJSON(w io.Writer, kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, header{kind: kind, length: uint64(len(b))}, b)
}

func readJSON(r *bufio.Reader, kind byte, v any) error {
	h, err := readHeader(r)
	if err != nil {
		return err
	}
	if h.kind != kind || h.length > maxHello {
		return fmt.Errorf("unexpected message (kind %d, %d bytes)", h.kind, h.length)
	}
	b := make([]byte, h.length)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type header struct {
	from, to int32
	kind     byte
	length   uint64
}

func writeFrame(w io.Writer, h header, payload []byte) error {
	var hb [headerLen]byte
	binary.LittleEndian.PutUint32(hb[0:], uint32(h.from))
	binary.LittleEndian.PutUint32(hb[4:], uint32(h.to))
	hb[8] = h.kind
	binary.LittleEndian.PutUint64(hb[9:], h.length)
	bufs := net.Buffers{hb[:], payload}
	_, err := bufs.WriteTo(w)
	return err
}

func readHeader(r io.Reader) (header, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, err
	}
	return header{
		from:   int32(binary.LittleEndian.Uint32(hb[0:])),
		to:     int32(binary.LittleEndian.Uint32(hb[4:])),
		kind:   hb[8],
		length: binary.LittleEndian.Uint64(hb[9:]),
	}, nil
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
}

type tconn struct {
	c   net.Conn
	rd  *bufio.Reader
	wmu sync.Mutex
	bye atomic.Bool // the peer closed its communicator
}

func (tc *tconn) write(h header, payload []byte, timeout time.Duration) error {
	tc.wmu.Lock()
	defer tc.wmu.Unlock()
	tc.c.SetWriteDeadline(time.Now().Add(timeout))
	h.length = uint64(len(payload))
	return writeFrame(tc.c, h, payload)
}

func startTCP(cfg Config, conns []net.Conn, readers []*bufio.Reader) *Comm {
	box := newInbox(cfg.World)
	t := &tcpTransport{rank: cfg.Rank, world: cfg.World, timeout: cfg.timeout(), conns: make([]*tconn, cfg.World), box: box}
	for r, c := range conns {
		if c != nil {
			t.conns[r] = &tconn{c: c, rd: readers[r]}
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
		t.box.put(to, ch, data)
		return nil
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

// relayAbort, on rank 0, passes rank from's failure on to every other rank.
func (t *tcpTransport) relayAbort(from int, msg string) {
	for r, c := range t.conns {
		if c != nil && r != from {
			c.write(header{from: int32(from), to: int32(r), kind: kindAbort}, []byte(msg), min(t.timeout, 5*time.Second))
		}
	}
}

// read takes the frames that arrive on the connection to rank peer.
func (t *tcpTransport) read(peer int) {
	defer t.readers.Done()
	tc := t.conns[peer]
	for {
		h, err := readHeader(tc.rd)
		var payload []byte
		if err == nil && h.length > maxFrame {
			err = fmt.Errorf("a message of %d bytes", h.length)
		}
		if err == nil {
			payload, err = readPayload(tc.rd, h.length)
		}
		if err == nil && (h.from < 0 || int(h.from) >= t.world || h.to < 0 || int(h.to) >= t.world) {
			err = fmt.Errorf("a message from rank %d to rank %d", h.from, h.to)
		}
		if err != nil {
			if tc.bye.Load() || t.closing.Load() {
				if t.rank == 0 {
					tc.c.Close() // the peer is done: nothing more goes to it
				}
				return
			}
			msg := fmt.Sprintf("its connection broke (%v): the process exited or the network failed", err)
			t.box.fail(abortError(t.rank, peer, msg))
			if t.rank == 0 {
				t.relayAbort(peer, msg)
			}
			return
		}
		from, to := int(h.from), int(h.to)
		switch h.kind {
		case kindColl, kindP2P:
			if to == t.rank {
				t.box.put(from, channel(h.kind), payload)
			} else if t.rank == 0 && t.conns[to] != nil {
				if err := t.conns[to].write(h, payload, t.timeout); err != nil {
					msg := fmt.Sprintf("rank 0 could not pass a message to rank %d on: %v", to, err)
					t.box.fail(abortError(0, to, msg))
					t.relayAbort(to, msg)
				}
			}
		case kindAbort:
			t.box.fail(abortError(t.rank, from, string(payload)))
			if t.rank == 0 {
				t.relayAbort(from, string(payload))
			}
		case kindBye:
			tc.bye.Store(true)
			t.box.leave(from)
		}
	}
}

// close says goodbye and waits (up to the timeout) for the connections to
// wind down: rank 0 keeps forwarding until every other rank said goodbye.
func (t *tcpTransport) close() error {
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
	select {
	case <-done:
	case <-time.After(t.timeout):
		t.closing.Store(true)
		errs = append(errs, fmt.Errorf("rank %d: close: ranks still running after %s", t.rank, t.timeout))
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
