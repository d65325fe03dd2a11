package comm

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// SecretEnv names the variable that holds a world's shared secret: every
// rank of one job must see the same value (the launcher or the user sets
// it; see docs/ranks.md).
const SecretEnv = "DAGRUN_SECRET"

// Secret is the key that a world's ranks share. It prints as a mark, never
// as its bytes, so that an error or a log of a Place does not leak it.
type Secret []byte

func (s Secret) String() string {
	if len(s) == 0 {
		return "(none)"
	}
	return "(set)"
}

// GoString keeps %#v from printing the bytes.
func (s Secret) GoString() string { return s.String() }

// Local reports whether rank 0's address is a loopback address, so that
// the world cannot span machines.
func (p Place) Local() bool {
	host, _, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Warning is what a process should print once before it joins p's world:
// a world that may span machines without a secret lets anyone who reaches
// rank 0's port join it. Empty when there is nothing to say.
func (p Place) Warning() string {
	if p.World <= 1 || len(p.Secret) > 0 || p.Local() {
		return ""
	}
	return fmt.Sprintf("warning: %s is not set: anyone who reaches %s can join this world as a rank and change its results; set %s to the same secret on every rank",
		SecretEnv, p.Addr, SecretEnv)
}

const (
	nonceLen = 32
	macLen   = sha256.Size
)

// errAuth is a frame whose MAC does not check: a stranger, a rank with
// another secret, or a replayed or reordered frame.
var errAuth = errors.New("a frame failed authentication")

// sessionKey is the key of one connection: the secret keyed over both
// ends' nonces, so that no frame of another connection or job verifies.
func sessionKey(secret []byte, root, peer []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(magic))
	m.Write(root)
	m.Write(peer)
	return m.Sum(nil)
}

// link is one end of an authenticated connection: every frame carries a
// MAC over its direction, its sequence number, its header and its payload,
// so that frames can be neither forged, replayed, reordered nor reflected.
type link struct {
	key     []byte
	out, in byte   // direction labels: toPeer or toRoot
	wseq    uint64 // next frame written; guarded by the writer's lock
	rseq    uint64 // next frame read; only the reading goroutine uses it
}

const (
	toPeer byte = 1 // a frame from rank 0 to another rank
	toRoot byte = 2 // a frame from another rank to rank 0
)

func newLink(key []byte, root bool) *link {
	if root {
		return &link{key: key, out: toPeer, in: toRoot}
	}
	return &link{key: key, out: toRoot, in: toPeer}
}

func (l *link) mac(dir byte, seq uint64, hb, payload []byte) []byte {
	m := hmac.New(sha256.New, l.key)
	var pre [9]byte
	pre[0] = dir
	binary.LittleEndian.PutUint64(pre[1:], seq)
	m.Write(pre[:])
	m.Write(hb)
	m.Write(payload)
	return m.Sum(nil)
}

func encodeHeader(h header) [headerLen]byte {
	var hb [headerLen]byte
	binary.LittleEndian.PutUint32(hb[0:], uint32(h.from))
	binary.LittleEndian.PutUint32(hb[4:], uint32(h.to))
	hb[8] = h.kind
	binary.LittleEndian.PutUint64(hb[9:], h.length)
	return hb
}

func decodeHeader(hb []byte) header {
	return header{
		from:   int32(binary.LittleEndian.Uint32(hb[0:])),
		to:     int32(binary.LittleEndian.Uint32(hb[4:])),
		kind:   hb[8],
		length: binary.LittleEndian.Uint64(hb[9:]),
	}
}

// write sends one frame with its MAC. The caller serialises writes.
func (l *link) write(w io.Writer, h header, payload []byte) error {
	h.length = uint64(len(payload))
	hb := encodeHeader(h)
	sum := l.mac(l.out, l.wseq, hb[:], payload)
	l.wseq++
	bufs := net.Buffers{hb[:], payload, sum}
	_, err := bufs.WriteTo(w)
	return err
}

// read takes the next frame, refusing one that claims more than limit
// bytes before reading its payload, and one whose MAC does not check.
func (l *link) read(r *bufio.Reader, limit uint64) (header, []byte, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, nil, err
	}
	h := decodeHeader(hb[:])
	if h.length > limit {
		return h, nil, fmt.Errorf("a frame of %d bytes (at most %d here)", h.length, limit)
	}
	payload, err := readPayload(r, h.length)
	if err != nil {
		return h, nil, err
	}
	var got [macLen]byte
	if _, err := io.ReadFull(r, got[:]); err != nil {
		return h, nil, err
	}
	if !hmac.Equal(got[:], l.mac(l.in, l.rseq, hb[:], payload)) {
		return h, nil, errAuth
	}
	l.rseq++
	return h, payload, nil
}
