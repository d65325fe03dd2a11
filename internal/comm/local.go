package comm

import "fmt"

// NewLocal returns the n ranks of a world inside one process: Comm r is
// rank r. Each rank's calls come from its own goroutine (as each rank is a
// session of its own).
func NewLocal(n int, opts Options) ([]*Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("a world has at least one rank, not %d", n)
	}
	boxes := make([]*inbox, n)
	for r := range boxes {
		boxes[r] = newInbox(n)
	}
	comms := make([]*Comm, n)
	for r := range comms {
		comms[r] = &Comm{rank: r, world: n, timeout: opts.timeout(), box: boxes[r], tr: &localTransport{boxes: boxes, rank: r}}
	}
	return comms, nil
}

// localTransport puts messages straight into the other ranks' inboxes.
type localTransport struct {
	boxes []*inbox
	rank  int
}

func (t *localTransport) send(to int, ch channel, data []byte) error {
	return t.boxes[to].put(t.rank, ch, data)
}

func (t *localTransport) abort(msg string) {
	for r, b := range t.boxes {
		if r != t.rank {
			b.fail(abortError(r, t.rank, msg))
		}
	}
}

func (t *localTransport) close() error {
	for r, b := range t.boxes {
		if r != t.rank {
			b.leave(t.rank)
		}
	}
	return nil
}

// abortError is what rank r reports when rank failed with msg.
func abortError(r, failed int, msg string) *Error {
	return &Error{Rank: r, Op: "run", Peer: failed, Msg: fmt.Sprintf("rank %d failed: %s", failed, msg), Err: ErrAborted}
}
