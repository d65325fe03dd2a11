package device

import "errors"

// Lifecycle errors, shared by the executor and every backend so that a
// program can test for them with errors.Is, whichever layer refused: each
// error that says so wraps one of these with the call and the object named.
var (
	// ErrClosed is matched by the error of a call on a session, graph,
	// world or backend that has been closed (or was closed while the call
	// ran).
	ErrClosed = errors.New("closed")
	// ErrBusy is matched by the error of a call made while work is still
	// in flight that it would race: another call of the same session from
	// another goroutine, or a Read, Write or Spans before the Sync of
	// work enqueued. Call Sync (or wait for the other call) first.
	ErrBusy = errors.New("work in flight")
)
