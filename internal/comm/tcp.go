package comm

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says how one process joins a world over TCP.
type Config struct {
	Place             // Rank, World and Addr (host:port of rank 0)
	Sequence []string // this rank's collective sequence (dag.Graph.CollectiveSequence)
	// Payload is what rank 0 hands every rank (the NCCL unique id); at most
	// maxPayload bytes. Other ranks leave it nil.
	Payload []byte
	// Listener, on rank 0, is the listener to use instead of listening at
	// Addr (tests pass one on a free port).
	Listener net.Listener
	Options
}

const (
	kindColl      = byte(collChannel)
	kindP2P       = byte(p2pChannel)
	kindAbort     = 2
	kindBye       = 3
	kindHello     = 4
	kindWelcome   = 5
	kindChallenge = 6
	kindSequence  = 7
	kindBusy      = 8 // rank 0 had no room: dial again

	headerLen = 17
	// maxHello bounds the one frame a connection may send before it is
	// authenticated: a stranger makes rank 0 hold at most this much.
	maxHello = 4 << 10
	// maxPayload bounds what rank 0 hands every rank (the NCCL unique id).
	maxPayload = 64 << 10
	// maxWelcome bounds rank 0's answer: the payload, or an error that may
	// quote collectives.
	maxWelcome = 1 << 20
	// maxSequence bounds one rank's collective sequence (spec.MaxOps of
	// them at most); it is read only from authenticated ranks, and memory
	// grows only as its bytes arrive.
	maxSequence = 1 << 30
	maxFrame    = 1 << 36 // bytes of one message: larger claims are a broken peer
	magic       = "dagrun-comm/2"
)

type hello struct {
	Magic string
	Rank  int
	World int
	Hash  string
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
//
// Every connection is authenticated with cfg.Secret (see SecretEnv): rank
// 0 sends a nonce, the rank answers with its own and a hello whose MAC is
// keyed by the secret over both, and every later frame in either direction
// carries a MAC over its sequence number. A connection whose hello does not
// check is closed without an answer.
func Rendezvous(ctx context.Context, cfg Config) (*Comm, error) {
	p := cfg.Place
	if p.World < 1 || p.Rank < 0 || p.Rank >= p.World {
		return nil, &Error{Rank: p.Rank, Op: "rendezvous", Peer: -1, Msg: fmt.Sprintf("rank %d is not in a world of %d", p.Rank, p.World), Err: ErrRendezvous}
	}
	if len(cfg.Payload) > maxPayload {
		return nil, &Error{Rank: p.Rank, Op: "rendezvous", Peer: -1, Msg: fmt.Sprintf("payload of %d bytes is too large (at most %d)", len(cfg.Payload), maxPayload), Err: ErrRendezvous}
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
	l    *link
	h    hello
}

// listen opens rank 0's listener on the address the other ranks connect
// to (MASTER_ADDR's), never on every interface.
func listen(addr string) (net.Listener, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("address %q: %v", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening at %s: %v (MASTER_ADDR must be an address of rank 0's machine, and DAGRUN_PORT a free port)", addr, err)
	}
	return ln, nil
}

func rendezvousRoot(ctx context.Context, cfg Config) (*Comm, error) {
	timeout := cfg.timeout()
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = listen(cfg.Addr); err != nil {
			return nil, rendezvousErr(0, -1, ErrRendezvous, "%v", err)
		}
	}
	defer ln.Close()
	where := ln.Addr().String()
	start := time.Now()
	deadline := start.Add(timeout)
	arrivals := make(chan arrival)
	stop := make(chan struct{})
	var acceptors sync.WaitGroup
	d := newDoor()
	wait := func() time.Duration { return min(helloTimeout, timeout/4, time.Until(deadline)) }
	acceptors.Go(func() { d.accept(ln, cfg.Secret, wait, arrivals, stop, &acceptors) })
	conns := make([]net.Conn, cfg.World)
	readers := make([]*bufio.Reader, cfg.World)
	links := make([]*link, cfg.World)
	hashes := make([]string, cfg.World)
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
			case h.Magic != magic:
				refuse(a, fmt.Sprintf("protocol %q, rank 0 speaks %q (run the same dagrun on every rank)", h.Magic, magic))
				continue
			case h.Rank <= 0 || h.Rank >= cfg.World:
				refuse(a, fmt.Sprintf("rank %d is not in rank 0's world of %d", h.Rank, cfg.World))
				continue
			case conns[h.Rank] != nil:
				refuse(a, fmt.Sprintf("rank %d already joined (two processes claim the same rank)", h.Rank))
				continue
			}
			conns[h.Rank], readers[h.Rank], links[h.Rank], hashes[h.Rank] = a.conn, a.rd, a.l, h.Hash
			arrived++
			if h.World != cfg.World {
				failure = rendezvousErr(0, h.Rank, ErrMismatch, "rank %d says the world has %d ranks, rank 0 says %d", h.Rank, h.World, cfg.World)
			}
		case <-timer.C:
			var missing []string
			for r := 1; r < cfg.World; r++ {
				if conns[r] == nil {
					missing = append(missing, strconv.Itoa(r))
				}
			}
			hint := d.hint(where)
			failure = rendezvousErr(0, -1, ErrRendezvous, "rank%s %s of %d did not reach the rendezvous at %s within %s (are they running, with MASTER_ADDR and DAGRUN_PORT pointing at rank 0?)%s",
				plural(len(missing)), strings.Join(missing, ", "), cfg.World, where, timeout, hint)
		case <-ctx.Done():
			failure = rendezvousErr(0, -1, ctx.Err(), "%v", ctx.Err())
		}
	}
	close(stop)
	ln.Close()
	d.shut()
	if failure == nil {
		failure = compareRanks(cfg, conns, readers, links, hashes, deadline)
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
		if err := writeJSON(c, links[r], kindWelcome, w); err != nil && failure == nil {
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
	cm := startTCP(cfg, conns, readers, links)
	cm.payload = cfg.Payload
	return cm, nil
}

// greet sends w's connection a nonce and reads its hello, which must be
// authenticated by the secret over both nonces, within the connection's
// deadline (which the door sets).
func greet(d *door, w *waiting, secret []byte) (arrival, error) {
	conn := w.conn
	a := arrival{conn: conn, rd: bufio.NewReaderSize(conn, maxHello)}
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	hb := encodeHeader(header{kind: kindChallenge, length: nonceLen})
	bufs := net.Buffers{hb[:], nonce}
	if _, err := bufs.WriteTo(conn); err != nil {
		return a, err
	}
	if _, err := a.rd.Peek(1); err != nil {
		return a, err
	}
	if !d.speak(w) {
		return a, errBusy
	}
	l, h, err := readHello(a.rd, secret, nonce)
	a.l, a.h = l, h
	return a, err
}

// readHello reads the first frame of a connection: the rank's nonce and
// hello, at most maxHello bytes, and checks its MAC before it parses it.
func readHello(r *bufio.Reader, secret, rootNonce []byte) (*link, hello, error) {
	var h hello
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, h, err
	}
	hd := decodeHeader(hb[:])
	if hd.kind != kindHello || hd.length < nonceLen || hd.length > maxHello {
		return nil, h, fmt.Errorf("not a hello (kind %d, %d bytes)", hd.kind, hd.length)
	}
	payload := make([]byte, hd.length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, h, err
	}
	var got [macLen]byte
	if _, err := io.ReadFull(r, got[:]); err != nil {
		return nil, h, err
	}
	l := newLink(sessionKey(secret, rootNonce, payload[:nonceLen]), true)
	if !hmac.Equal(got[:], l.mac(l.in, l.rseq, hb[:], payload)) {
		return nil, h, errAuth
	}
	l.rseq++
	if err := json.Unmarshal(payload[nonceLen:], &h); err != nil {
		return nil, h, err
	}
	return l, h, nil
}

// compareRanks reads every rank's collective sequence, sent after its
// hello, and names the first difference.
func compareRanks(cfg Config, conns []net.Conn, readers []*bufio.Reader, links []*link, hashes []string, deadline time.Time) error {
	seqs := make([][]string, cfg.World)
	seqs[0] = cfg.Sequence
	for r := 1; r < cfg.World; r++ {
		conns[r].SetReadDeadline(deadline.Add(5 * time.Second))
		h, b, err := links[r].read(readers[r], maxSequence)
		conns[r].SetReadDeadline(time.Time{})
		if err == nil && h.kind != kindSequence {
			err = fmt.Errorf("kind %d where its collective sequence belongs", h.kind)
		}
		if err == nil {
			err = json.Unmarshal(b, &seqs[r])
		}
		if err != nil {
			return rendezvousErr(0, r, ErrRendezvous, "rank %d's collective sequence: %v", r, err)
		}
		if hashes[r] != SequenceHash(seqs[r]) {
			return rendezvousErr(0, r, ErrMismatch, "rank %d sent a sequence that does not match its hash", r)
		}
	}
	return CompareSequences(seqs)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// refuse answers an authenticated rank that rank 0 cannot let in.
func refuse(a arrival, msg string) {
	a.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	writeJSON(a.conn, a.l, kindWelcome, welcome{Err: "rank 0 refused: " + msg})
	a.conn.Close()
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
	var last error
	turnedAway := 0
	rootNonce := make([]byte, nonceLen)
	d := net.Dialer{}
	// Dial until rank 0 lets this rank in: it may not listen yet, or may
	// have turned the connection away while busy with others.
	for {
		left := time.Until(deadline)
		if left <= 0 {
			if errors.Is(last, errBusy) {
				return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, "rank 0 at %s turned this rank away %d time%s within %s: it had no room among connections that did not say who they are (is something else holding connections to rank 0's port open?)",
					cfg.Addr, turnedAway, plural(turnedAway), timeout)
			}
			return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, "rank 0 did not answer at %s within %s: %v (is it running? MASTER_ADDR and DAGRUN_PORT must name it)",
				cfg.Addr, timeout, last)
		}
		dctx, cancel := context.WithTimeout(ctx, left)
		c, err := d.DialContext(dctx, "tcp", cfg.Addr)
		cancel()
		if err == nil {
			rd := bufio.NewReader(c)
			if err = readChallenge(c, rd, rootNonce, deadline); err == nil {
				cm, jerr := join(ctx, cfg, c, rd, rootNonce, timeout)
				if !errors.Is(jerr, errBusy) {
					return cm, jerr
				}
				err = jerr
			} else {
				c.Close()
			}
			if errors.Is(err, errBusy) {
				turnedAway++
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
				return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, "rank 0 at %s did not greet this rank: %v (is a dagrun of this version listening there?)", cfg.Addr, err)
			}
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
}

// join sends rank 0 this rank's hello and collective sequence on conn,
// whose challenge was rootNonce, and reads rank 0's welcome. errBusy: rank 0
// had no room for the connection, which is closed; dial again.
func join(ctx context.Context, cfg Config, conn net.Conn, rd *bufio.Reader, rootNonce []byte, timeout time.Duration) (*Comm, error) {
	fail := func(format string, a ...any) (*Comm, error) {
		conn.Close()
		return nil, rendezvousErr(cfg.Rank, 0, ErrRendezvous, format, a...)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	l := newLink(sessionKey(cfg.Secret, rootNonce, nonce), false)
	hj, err := json.Marshal(hello{Magic: magic, Rank: cfg.Rank, World: cfg.World, Hash: SequenceHash(cfg.Sequence)})
	if err != nil {
		return fail("%v", err)
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	err = l.write(conn, header{kind: kindHello}, append(nonce, hj...))
	// The sequence goes in a frame of its own: the hello stays small enough
	// to be read before it is authenticated.
	if err == nil {
		err = writeJSON(conn, l, kindSequence, cfg.Sequence)
	}
	if err != nil {
		if answeredBusy(conn, rd, time.Now().Add(time.Second)) {
			conn.Close()
			return nil, errBusy
		}
		return fail("sending to rank 0 at %s: %v", cfg.Addr, err)
	}
	conn.SetWriteDeadline(time.Time{})
	// Rank 0 answers when every rank is in, or at its own timeout, which
	// started before this rank connected.
	if answeredBusy(conn, rd, time.Now().Add(timeout+5*time.Second)) {
		conn.Close()
		return nil, errBusy
	}
	var w welcome
	if err := readJSON(rd, l, kindWelcome, maxWelcome, &w); err != nil {
		if ctx.Err() != nil {
			return fail("%v", ctx.Err())
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, errAuth) {
			return fail("rank 0 at %s did not let this rank in: %v (is %s the same on every rank?)", cfg.Addr, err, SecretEnv)
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
	links := make([]*link, cfg.World)
	conns[0], readers[0], links[0] = conn, rd, l
	cm := startTCP(cfg, conns, readers, links)
	cm.payload = w.Payload
	return cm, nil
}

// answeredBusy reports whether rank 0's next frame on conn, awaited until
// deadline, says it had no room for this connection. The frame stays
// unread otherwise.
func answeredBusy(conn net.Conn, rd *bufio.Reader, deadline time.Time) bool {
	conn.SetReadDeadline(deadline)
	hb, err := rd.Peek(headerLen)
	return err == nil && decodeHeader(hb).kind == kindBusy
}

// readChallenge reads rank 0's greeting, the nonce its hello must be
// keyed over.
func readChallenge(c net.Conn, rd *bufio.Reader, nonce []byte, deadline time.Time) error {
	c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	var hb [headerLen]byte
	if _, err := io.ReadFull(rd, hb[:]); err != nil {
		return err
	}
	if h := decodeHeader(hb[:]); h.kind == kindBusy {
		return errBusy
	} else if h.kind != kindChallenge || h.length != nonceLen {
		return fmt.Errorf("not a dagrun rendezvous of this version (kind %d, %d bytes)", h.kind, h.length)
	}
	_, err := io.ReadFull(rd, nonce)
	return err
}

func writeJSON(w io.Writer, l *link, kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return l.write(w, header{kind: kind}, b)
}

func readJSON(r *bufio.Reader, l *link, kind byte, limit uint64, v any) error {
	h, b, err := l.read(r, limit)
	if err != nil {
		return err
	}
	if h.kind != kind {
		return fmt.Errorf("unexpected message (kind %d, %d bytes)", h.kind, h.length)
	}
	return json.Unmarshal(b, v)
}
