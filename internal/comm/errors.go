package comm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Sentinels that Error wraps, for errors.Is.
var (
	// ErrTimeout: a rank waited longer than Options.Timeout for another.
	ErrTimeout = errors.New("timed out")
	// ErrAborted: another rank failed, or its process went away.
	ErrAborted = errors.New("another rank failed")
	// ErrMismatch: the ranks disagree (collective sequence, sizes, world).
	ErrMismatch = errors.New("ranks disagree")
	// ErrRendezvous: the ranks could not meet.
	ErrRendezvous = errors.New("rendezvous failed")
	// ErrUnmatched: a send that no recv took.
	ErrUnmatched = errors.New("send without its recv")
	// ErrClosed: the communicator was closed.
	ErrClosed = errors.New("communicator closed")
)

// Error is a failure of one rank's collective or rendezvous.
type Error struct {
	Rank int    // the rank that reports it
	Op   string // the call, for example "all_reduce" or "rendezvous"
	Peer int    // the rank it concerns, -1 if none
	Msg  string
	Err  error // one of the sentinels, or the cause
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d: %s: %s", e.Rank, e.Op, e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// reason is a network error without the Go net package's framing ("dial
// tcp 127.0.0.1:29500: connect: "): what went wrong, such as "connection
// refused".
func reason(err error) error {
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		err = oe.Err
	}
	if se, ok := errors.AsType[*os.SyscallError](err); ok {
		err = se.Err
	}
	return err
}
