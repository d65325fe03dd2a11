package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// DefaultTimeout is how long a rank waits for another by default.
const DefaultTimeout = 5 * time.Minute

// Options tune a communicator.
type Options struct {
	// Timeout bounds every wait for another rank (rendezvous, a
	// collective's data, a recv); zero means DefaultTimeout.
	Timeout time.Duration
	// InboxBytes bounds the bytes that one rank may have sent to another
	// over TCP that no collective or recv has taken yet; zero means
	// DefaultInboxBytes. A single message of any size is let in when its
	// sender has nothing else queued.
	InboxBytes int
	// Waiting, when set, is called every WaitReport while a rendezvous
	// waits, with the ranks it waits for (rank 0: those not in yet; the
	// others: rank 0, which lets them in when all are) and the time so far.
	Waiting func(missing []int, waited time.Duration)
}

// DefaultInboxBytes is the default of Options.InboxBytes.
const DefaultInboxBytes = 1 << 30

// maxQueuedMessages bounds the messages one rank may have queued at
// another over TCP.
const maxQueuedMessages = 1 << 16

func (o Options) inboxBytes() int {
	if o.InboxBytes <= 0 {
		return DefaultInboxBytes
	}
	return o.InboxBytes
}

// WaitReport is how often a rendezvous calls Options.Waiting.
const WaitReport = 5 * time.Second

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// transport delivers a message to another rank's inbox; it never blocks on
// the receiver taking it.
type transport interface {
	send(to int, ch channel, data []byte) error
	// abort tells every other rank that this one failed with msg.
	abort(msg string)
	// close tells the others this rank is done and releases the transport.
	close() error
}

// Comm is one rank's end of a world. Its methods are called by one
// goroutine at a time, in the same collective order on every rank.
type Comm struct {
	rank, world int
	timeout     time.Duration
	box         *inbox
	tr          transport
	payload     []byte

	mu      sync.Mutex
	aborted bool
	closed  bool
}

// Rank is this rank's index in the world.
func (c *Comm) Rank() int { return c.rank }

// World is the number of ranks.
func (c *Comm) World() int { return c.world }

// Payload is what rank 0 handed to every rank at rendezvous (the NCCL
// unique id); nil for in-process worlds.
func (c *Comm) Payload() []byte { return c.payload }

func (c *Comm) errf(op string, peer int, sentinel error, format string, a ...any) *Error {
	return &Error{Rank: c.rank, Op: op, Peer: peer, Msg: fmt.Sprintf(format, a...), Err: sentinel}
}

func (c *Comm) usable(op string) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return c.errf(op, -1, ErrClosed, "the communicator is closed")
	}
	return c.box.failed()
}

func (c *Comm) send(op string, to int, ch channel, data []byte) error {
	if err := c.tr.send(to, ch, data); err != nil {
		// A peer's failure closes its connection after it is recorded:
		// the recorded cause names the rank, the write's error does not.
		if cause := c.box.failed(); cause != nil {
			return cause
		}
		return c.fail(c.errf(op, to, ErrAborted, "sending to rank %d: %v", to, err))
	}
	return nil
}

func (c *Comm) recv(ctx context.Context, op string, from int, ch channel, want int) ([]byte, error) {
	e := &Error{Rank: c.rank, Op: op, Peer: from}
	m, err := c.box.take(ctx, from, ch, c.timeout, e)
	if err != nil {
		if err == e {
			// This rank gives up: tell the others, so they do not wait out
			// their own timeouts.
			return nil, c.fail(e)
		}
		return nil, err
	}
	if want >= 0 && len(m) != want {
		return nil, c.fail(c.errf(op, from, ErrMismatch, "rank %d's view holds %d bytes, rank %d's %d (every rank must pass views of one size)",
			from, len(m), c.rank, want))
	}
	return m, nil
}

// fail records err as this rank's failure, tells every other rank, and
// returns err.
func (c *Comm) fail(err error) error {
	c.box.fail(err)
	c.mu.Lock()
	first := !c.aborted
	c.aborted = true
	c.mu.Unlock()
	if first {
		c.tr.abort(err.Error())
	}
	return err
}

// Abort makes every other rank's pending and later calls fail with an error
// naming this rank and cause; this rank's later calls fail with cause.
func (c *Comm) Abort(cause error) {
	if cause == nil {
		cause = errors.New("aborted")
	}
	c.fail(cause)
}

// AllReduce reduces buf across the ranks in place (see Reduce for the
// semantics of each reduction).
func (c *Comm) AllReduce(ctx context.Context, buf []byte, dt dag.DType, op dag.Reduction) error {
	const name = "all_reduce"
	if err := c.usable(name); err != nil {
		return err
	}
	if int64(len(buf))%dt.Size() != 0 {
		return c.errf(name, -1, ErrMismatch, "%d bytes are not a whole number of %s elements", len(buf), dt)
	}
	if c.rank != 0 {
		return c.viaRoot(ctx, name, buf, buf)
	}
	srcs, err := c.gather(ctx, name, buf)
	if err != nil {
		return err
	}
	if err := Reduce(dt, op, buf, srcs); err != nil {
		return c.fail(c.errf(name, -1, err, "%v", err))
	}
	return c.scatter(name, func(int) []byte { return buf })
}

// AllGather sets out to the concatenation of every rank's in, in rank
// order; out holds World() times len(in) bytes.
func (c *Comm) AllGather(ctx context.Context, in, out []byte) error {
	const name = "all_gather"
	if err := c.usable(name); err != nil {
		return err
	}
	if len(out) != len(in)*c.world {
		return c.errf(name, -1, ErrMismatch, "out holds %d bytes; in times %d ranks is %d", len(out), c.world, len(in)*c.world)
	}
	if c.rank != 0 {
		return c.viaRoot(ctx, name, in, out)
	}
	srcs, err := c.gather(ctx, name, in)
	if err != nil {
		return err
	}
	for r, s := range srcs {
		copy(out[r*len(in):], s)
	}
	return c.scatter(name, func(int) []byte { return out })
}

// ReduceScatter reduces in across the ranks and sets out to this rank's
// block of the result; in holds World() times len(out) bytes.
func (c *Comm) ReduceScatter(ctx context.Context, in, out []byte, dt dag.DType, op dag.Reduction) error {
	const name = "reduce_scatter"
	if err := c.usable(name); err != nil {
		return err
	}
	if len(in) != len(out)*c.world {
		return c.errf(name, -1, ErrMismatch, "in holds %d bytes; out times %d ranks is %d", len(in), c.world, len(out)*c.world)
	}
	if int64(len(out))%dt.Size() != 0 {
		return c.errf(name, -1, ErrMismatch, "%d bytes are not a whole number of %s elements", len(out), dt)
	}
	if c.rank != 0 {
		return c.viaRoot(ctx, name, in, out)
	}
	srcs, err := c.gather(ctx, name, in)
	if err != nil {
		return err
	}
	full := make([]byte, len(in))
	if err := Reduce(dt, op, full, srcs); err != nil {
		return c.fail(c.errf(name, -1, err, "%v", err))
	}
	copy(out, full[:len(out)])
	k := len(out)
	return c.scatter(name, func(r int) []byte { return full[r*k : (r+1)*k] })
}

// Broadcast copies rank root's buf into every other rank's buf.
func (c *Comm) Broadcast(ctx context.Context, buf []byte, root int) error {
	const name = "broadcast"
	if err := c.usable(name); err != nil {
		return err
	}
	if root < 0 || root >= c.world {
		return c.errf(name, root, ErrMismatch, "root rank %d is not in a world of %d", root, c.world)
	}
	if c.rank == root {
		m := clone(buf)
		for r := range c.world {
			if r != root {
				if err := c.send(name, r, collChannel, m); err != nil {
					return err
				}
			}
		}
		return nil
	}
	m, err := c.recv(ctx, name, root, collChannel, len(buf))
	if err != nil {
		return err
	}
	copy(buf, m)
	return nil
}

// Send sends buf to rank to; it returns once buf is copied, without
// waiting for the Recv.
func (c *Comm) Send(ctx context.Context, buf []byte, to int) error {
	const name = "send"
	if err := c.usable(name); err != nil {
		return err
	}
	if to < 0 || to >= c.world {
		return c.errf(name, to, ErrMismatch, "peer rank %d is not in a world of %d", to, c.world)
	}
	return c.send(name, to, p2pChannel, clone(buf))
}

// Recv receives into buf the next message that rank from sent to this rank
// with Send; the two hold the same number of bytes.
func (c *Comm) Recv(ctx context.Context, buf []byte, from int) error {
	const name = "recv"
	if err := c.usable(name); err != nil {
		return err
	}
	if from < 0 || from >= c.world {
		return c.errf(name, from, ErrMismatch, "peer rank %d is not in a world of %d", from, c.world)
	}
	m, err := c.recv(ctx, name, from, p2pChannel, len(buf))
	if err != nil {
		return err
	}
	copy(buf, m)
	return nil
}

// Finish ends a run on every rank: it waits for all ranks to get here,
// then fails on every rank if any rank holds a message that no Recv took (a
// send without its recv), naming the ranks.
func (c *Comm) Finish(ctx context.Context) error {
	const name = "finish"
	if err := c.usable(name); err != nil {
		return err
	}
	// First a barrier: once it completes, every send of every rank has
	// reached its inbox (each rank's sends precede its barrier message on
	// the one path through rank 0).
	if err := c.AllReduce(ctx, []byte{0}, dag.U8, dag.Max); err != nil {
		return err
	}
	left := c.box.pending(p2pChannel)
	counts := make([]byte, 8*c.world*c.world) // [receiver][sender] int64
	enc := make([]int64, c.world*c.world)
	for from, n := range left {
		enc[c.rank*c.world+from] = int64(n)
	}
	encode(counts, enc)
	if err := c.AllReduce(ctx, counts, dag.I64, dag.Sum); err != nil {
		return err
	}
	all := decode[int64](counts)
	var unmatched []string
	for to := range c.world {
		for from := range c.world {
			if n := all[to*c.world+from]; n > 0 {
				unmatched = append(unmatched, fmt.Sprintf("%d from rank %d to rank %d", n, from, to))
			}
		}
	}
	if len(unmatched) > 0 {
		return c.errf(name, -1, ErrUnmatched, "sends that no recv took: %s (every send needs a recv on its peer, in the same order)",
			strings.Join(unmatched, ", "))
	}
	return nil
}

// Close releases the communicator. Rank 0 waits (up to the timeout) for the
// others to close first, since their messages pass through it; once the
// world has failed it does not wait.
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	return c.tr.close()
}

// gather, on rank 0, collects every rank's bytes, rank 0's own first.
func (c *Comm) gather(ctx context.Context, name string, own []byte) ([][]byte, error) {
	srcs := make([][]byte, c.world)
	srcs[0] = clone(own)
	for r := 1; r < c.world; r++ {
		m, err := c.recv(ctx, name, r, collChannel, len(own))
		if err != nil {
			return nil, err
		}
		srcs[r] = m
	}
	return srcs, nil
}

// scatter, on rank 0, sends part(r) to every other rank r.
func (c *Comm) scatter(name string, part func(r int) []byte) error {
	for r := 1; r < c.world; r++ {
		if err := c.send(name, r, collChannel, clone(part(r))); err != nil {
			return err
		}
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// viaRoot is a collective on a rank other than 0: rank 0 does the work, so
// this rank sends it in and receives its share of the result into out.
func (c *Comm) viaRoot(ctx context.Context, name string, in, out []byte) error {
	if err := c.send(name, 0, collChannel, clone(in)); err != nil {
		return err
	}
	m, err := c.recv(ctx, name, 0, collChannel, len(out))
	if err != nil {
		return err
	}
	copy(out, m)
	return nil
}
