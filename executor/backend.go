package executor

import (
	"context"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Backend runs the steps of a plan. Streams and events are numbered densely
// from 0 in the order they are created. Calls come from one goroutine; Run,
// Record and Wait only enqueue work and may return before it is done. Errors
// about one op are *dag.OpError values.
type Backend interface {
	// Open prepares runs of g: it loads the kernels g launches and allocates
	// g's persistent buffers, filled with their initial contents.
	Open(ctx context.Context, g *dag.Graph) error
	// NewStream creates the next stream, on device, with priority (higher first).
	NewStream(device int, priority dag.Priority) error
	// NewEvent creates the next event.
	NewEvent() error
	// Record enqueues a record of event on stream: the event is reached
	// when the work enqueued on stream before it is done. An event may be
	// recorded again (once per run); each record starts a new generation.
	Record(stream, event int) error
	// Wait makes the work enqueued on stream after it wait until event
	// reaches the generation of its latest Record enqueued so far (CUDA's
	// cuStreamWaitEvent semantics); waiting on an event never recorded
	// waits for nothing.
	Wait(stream, event int) error
	// Run enqueues op (alloc, free, copy, fill, launch or host step) on stream.
	Run(stream int, op *dag.Op) error
	// Sync waits until all enqueued work is done and reports the first error
	// it raised; an op's failure makes the backend skip the work after it.
	// When ctx ends first it abandons the work and returns ctx.Err(). Either
	// way nothing is running when Sync returns, and the backend takes the
	// next run.
	Sync(ctx context.Context) error
	// Read returns the contents of a persistent buffer; call it after Sync.
	Read(b *dag.Buffer) ([]byte, error)
	// Close releases everything Open and later calls made.
	Close() error
}

// Timer is implemented by backends that can time the ops they run.
type Timer interface {
	// SetTiming turns timing on or off; call it before the streams are made.
	// With timing off a backend creates no timing resources at all.
	SetTiming(on bool)
	// Spans calls f with the start and end of each op run since the last
	// call, measured from a common origin, once the runs are synchronised.
	Spans(f func(op, stream int, start, end time.Duration)) error
}
