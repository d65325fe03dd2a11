package comm

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// channel separates the traffic of collectives from that of send/recv, so
// that a pending send cannot be taken for a collective's data.
type channel uint8

const (
	collChannel channel = iota
	p2pChannel
	numChannels
)

// inbox holds the messages that reached one rank, in order per sender and
// channel, and the rank's failure state. Puts never block.
type inbox struct {
	mu    sync.Mutex
	q     [][numChannels][][]byte // [from][channel]: FIFO
	gone  []bool                  // peers that closed their communicator
	err   error                   // set once: every later wait fails with it
	wake  chan struct{}           // closed and replaced on every change
	world int
	// limitBytes and limitCount bound what one sender may have queued and
	// not taken (zero: no bound). A message is always let in when its
	// sender has nothing queued, however large.
	limitBytes, limitCount int
	qbytes                 []int // bytes queued per sender
	qcount                 []int // messages queued per sender
}

func newInbox(world int) *inbox {
	return &inbox{q: make([][numChannels][][]byte, world), gone: make([]bool, world), wake: make(chan struct{}), world: world,
		qbytes: make([]int, world), qcount: make([]int, world)}
}

func (b *inbox) changed() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// put queues a message, or refuses it when its sender has more queued
// than the inbox's bounds allow (a rank far ahead of this one, or a flood).
func (b *inbox) put(from int, ch channel, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.qcount[from]; n > 0 {
		if b.limitCount > 0 && n >= b.limitCount {
			return fmt.Errorf("rank %d sent %d messages that rank's collectives and recvs have not taken (at most %d are held)", from, n+1, b.limitCount)
		}
		if b.limitBytes > 0 && b.qbytes[from]+len(data) > b.limitBytes {
			return fmt.Errorf("rank %d sent %d bytes that no collective or recv has taken (at most %d are held)", from, b.qbytes[from]+len(data), b.limitBytes)
		}
	}
	b.q[from][ch] = append(b.q[from][ch], data)
	b.qcount[from]++
	b.qbytes[from] += len(data)
	b.changed()
	return nil
}

// fail sets the inbox's failure, keeping the first.
func (b *inbox) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
		b.changed()
	}
}

func (b *inbox) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *inbox) leave(peer int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone[peer] = true
	b.changed()
}

// pending counts the messages of channel ch not taken yet, per sender.
func (b *inbox) pending(ch channel) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := make([]int, b.world)
	for from := range b.q {
		n[from] = len(b.q[from][ch])
	}
	return n
}

// take waits for the next message from rank from on ch. e is filled in
// with the reason when it fails.
func (b *inbox) take(ctx context.Context, from int, ch channel, timeout time.Duration, e *Error) ([]byte, error) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		b.mu.Lock()
		if q := b.q[from][ch]; len(q) > 0 {
			m := q[0]
			q[0] = nil
			b.q[from][ch] = q[1:]
			b.qcount[from]--
			b.qbytes[from] -= len(m)
			b.mu.Unlock()
			return m, nil
		}
		if b.err != nil {
			err := b.err
			b.mu.Unlock()
			return nil, err
		}
		if b.gone[from] {
			b.mu.Unlock()
			e.Peer, e.Msg, e.Err = from, fmt.Sprintf("rank %d closed its communicator before sending", from), ErrAborted
			return nil, e
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			e.Peer, e.Msg, e.Err = from, fmt.Sprintf("waiting for rank %d: %v", from, ctx.Err()), ctx.Err()
			return nil, e
		case <-timer:
			e.Peer, e.Msg, e.Err = from, fmt.Sprintf("no data from rank %d within %s (is it running, and issuing the same collectives?)", from, timeout), ErrTimeout
			return nil, e
		}
	}
}
