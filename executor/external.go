package executor

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
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

// externals returns the ExternalEvents of d, the device session of a
// session closed or not, or an error naming verb.
func externals(d device.Session, closed *atomic.Bool, verb string) (device.ExternalEvents, error) {
	if closed.Load() {
		return nil, fmt.Errorf("executor: %s: session is %w", verb, device.ErrClosed)
	}
	x, ok := d.(device.ExternalEvents)
	if !ok {
		return nil, fmt.Errorf("executor: %s: device session %T cannot order its work with the caller's events", verb, d)
	}
	return x, nil
}

// Enqueue submits one run of the plan ordered with the caller's events
// and returns without waiting: every stream of the run first waits for
// x.After, and x.Done is recorded once every stream is done. Call Sync
// before the next Run, Enqueue, Read or Write: it reports the run's error.
// A failed submission is drained and returned at once.
func (s *Session) Enqueue(ctx context.Context, x External) error {
	xe, err := externals(s.d, &s.closed, "Enqueue")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("executor: run not started: %w", err)
	}
	s.time.spans = s.time.spans[:0]
	s.beside.noteAll() // beside.go: the whole plan may run until Sync
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
	if err := s.sub.submit(ctx, s.p.Graph.Ops, "run"); err != nil {
		return err
	}
	if x.Done == 0 || len(s.p.Streams) == 0 {
		return nil
	}
	if err := s.made.join(s.p.Streams); err != nil {
		return err
	}
	if err := xe.RecordExternal(originStream, x.Done); err != nil {
		return fmt.Errorf("executor: record the caller's event: %w", err)
	}
	return nil
}

// join makes the origin stream wait for every other of the plan's
// streams, with events of the session's own made at the first join (after
// the plan's and its bodies').
func (m *made) join(streams []planner.Stream) error {
	for len(m.joins) < len(streams)-1 {
		if err := m.d.NewEvent(); err != nil {
			return fmt.Errorf("executor: create a join event: %w", err)
		}
		m.joins = append(m.joins, m.events)
		m.events++
	}
	for i := 1; i < len(streams); i++ {
		ev := m.joins[i-1]
		if err := m.d.Record(i, ev); err != nil {
			return fmt.Errorf("executor: join stream %s: %w", streamName(streams[i]), err)
		}
		if err := m.d.Wait(originStream, ev); err != nil {
			return fmt.Errorf("executor: join stream %s: %w", streamName(streams[i]), err)
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
	err := s.beside.sync(ctx)
	s.time.collect()
	return syncError(ctx, err)
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
	xe, err := externals(g.s.d, &g.s.closed, "LaunchAfter")
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
