package executor

import (
	"context"
	"fmt"

	"github.com/dagrun/dagrun/executor/device"
)

// Callers' own streams. A program that already has streams (from cgo, a
// library, PyTorch) orders dagrun's work with its own through events it
// made and owns, the way PyTorch's ExternalStream or CUDASTF's stream_ctx
// compose with foreign streams: dagrun's work starts after the caller's
// event After, and dagrun records the caller's event Done once its work is
// done, for the caller's stream to wait on. dagrun never uses the legacy
// default stream, so nothing else is implied between the two.
//
// On CUDA an event is a CUevent handle (uintptr) made in the context of
// the plan's device; on the cpu backend it is a *cpu.Event's Handle.

// External names the caller's events a run or replay is ordered with;
// zero leaves that side unordered.
type External struct {
	// After is an event the caller recorded: dagrun's work waits for its
	// latest record made before the call.
	After uintptr
	// Done is an event dagrun records once all of the run's work is done.
	Done uintptr
}

// externals returns the device's ExternalEvents, or an error naming verb.
func (s *Session) externals(verb string) (device.ExternalEvents, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("executor: %s: session is %w", verb, device.ErrClosed)
	}
	x, ok := s.d.(device.ExternalEvents)
	if !ok {
		return nil, fmt.Errorf("executor: %s: device session %T cannot order its work with the caller's events", verb, s.d)
	}
	return x, nil
}

// Enqueue submits one run of the plan ordered with the caller's events
// and returns without waiting: every stream of the run first waits for
// x.After, and x.Done is recorded once every stream is done. Call Sync
// before the next Run, Enqueue, Read or Write: it reports the run's error.
// A failed submission is drained and returned at once.
func (s *Session) Enqueue(ctx context.Context, x External) error {
	xe, err := s.externals("Enqueue")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("executor: run not started: %w", err)
	}
	s.spans = s.spans[:0]
	s.noteAll() // beside.go: the whole plan may run until Sync
	if err := s.enqueueExternal(ctx, xe, x); err != nil {
		return s.drain(ctx, err)
	}
	return nil
}

func (s *Session) enqueueExternal(ctx context.Context, xe device.ExternalEvents, x External) error {
	if x.After != 0 {
		for i := range s.p.Streams {
			if err := xe.WaitExternal(i, x.After); err != nil {
				return fmt.Errorf("executor: stream %s waits for the caller's event: %w", streamName(s.p.Streams[i]), err)
			}
		}
	}
	if err := s.submit(ctx, s.p.Graph.Ops, "run"); err != nil {
		return err
	}
	if x.Done == 0 || len(s.p.Streams) == 0 {
		return nil
	}
	if err := s.joinStreams(); err != nil {
		return err
	}
	if err := xe.RecordExternal(originStream, x.Done); err != nil {
		return fmt.Errorf("executor: record the caller's event: %w", err)
	}
	return nil
}

// joinStreams makes the origin stream wait for every other stream, with
// events of the session's own made at the first join (after the plan's).
func (s *Session) joinStreams() error {
	for len(s.joins) < len(s.p.Streams)-1 {
		if err := s.d.NewEvent(); err != nil {
			return fmt.Errorf("executor: create a join event: %w", err)
		}
		s.joins = append(s.joins, s.events)
		s.events++
	}
	for i := 1; i < len(s.p.Streams); i++ {
		ev := s.joins[i-1]
		if err := s.d.Record(i, ev); err != nil {
			return fmt.Errorf("executor: join stream %s: %w", streamName(s.p.Streams[i]), err)
		}
		if err := s.d.Wait(originStream, ev); err != nil {
			return fmt.Errorf("executor: join stream %s: %w", streamName(s.p.Streams[i]), err)
		}
	}
	return nil
}

// Sync waits for the run Enqueue submitted and reports its error, as Run
// does.
func (s *Session) Sync(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("executor: Sync: session is %w", device.ErrClosed)
	}
	err := s.syncDevice(ctx)
	s.collectSpans()
	return s.syncError(ctx, err)
}

// RunAfter is Run ordered with the caller's events: Enqueue, then Sync.
func (s *Session) RunAfter(ctx context.Context, x External) error {
	if err := s.Enqueue(ctx, x); err != nil {
		return err
	}
	return s.Sync(ctx)
}

// LaunchAfter enqueues one replay ordered with the caller's events and
// returns; Sync waits for it. The replay starts after x.After, and x.Done
// is recorded once the whole replay is done.
func (g *Graph) LaunchAfter(ctx context.Context, x External) error {
	if g.closed.Load() {
		return errGraphClosed
	}
	xe, err := g.s.externals("LaunchAfter")
	if err != nil {
		return err
	}
	if x.After != 0 {
		if err := xe.WaitExternal(originStream, x.After); err != nil {
			return fmt.Errorf("executor: the replay waits for the caller's event: %w", err)
		}
	}
	if err := g.Launch(ctx); err != nil {
		return err
	}
	if x.Done != 0 {
		if err := xe.RecordExternal(originStream, x.Done); err != nil {
			return fmt.Errorf("executor: record the caller's event after the replay: %w", err)
		}
	}
	return nil
}

// RunAfter replays the graph once ordered with the caller's events and
// waits for it.
func (g *Graph) RunAfter(ctx context.Context, x External) error {
	if err := g.LaunchAfter(ctx, x); err != nil {
		return err
	}
	return g.Sync(ctx)
}
