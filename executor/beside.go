package executor

import (
	"context"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Writes beside running work. Between a Graph.Launch (or an Enqueue) and
// the Sync that waits for it, the session knows which buffers that work
// may touch: those its ops access, through the graph's Rebinds. Write
// takes a host buffer outside them at once, so that the host prepares the
// next batch while the device computes this one (double buffering).

// inFlight are the buffers that launched, not yet synchronised work may
// use, by buffer ID; nil when nothing is in flight.
type inFlight []bool

// noteGraph adds the buffers a replay of g uses.
func (s *Session) noteGraph(g *Graph) {
	busy := s.busyBuffers()
	bufs := s.p.Graph.Buffers
	for id, used := range g.used {
		if !used {
			continue
		}
		b := bufs[id]
		if to, ok := g.state.bind[b]; ok {
			b = to
		}
		busy[b.ID] = true
	}
}

// noteAll marks every buffer busy: work whose buffers the session does
// not follow (Enqueue's runs).
func (s *Session) noteAll() {
	busy := s.busyBuffers()
	for i := range busy {
		busy[i] = true
	}
}

func (s *Session) busyBuffers() inFlight {
	if s.busy == nil {
		s.busy = make(inFlight, len(s.p.Graph.Buffers))
	}
	return s.busy
}

// syncDevice waits for the device session's work; once it is done (ctx
// did not cut the wait short), nothing is in flight.
func (s *Session) syncDevice(ctx context.Context) error {
	err := s.d.Sync(ctx)
	if ctx.Err() == nil {
		s.busy = nil
	}
	return err
}

// writeBeside writes b while work is in flight, when that work does not
// use b and b is host memory the backend can write at once.
func (s *Session) writeBeside(b *dag.Buffer, data []byte) error {
	switch {
	case s.busy[b.ID]:
		return fmt.Errorf("executor: Write: buffer %q is used by the work still running (%w): call Sync first, or write a buffer it does not use (double buffering with Rebind)", b.Name, ErrBusy)
	case !b.Placement.Host():
		return fmt.Errorf("executor: Write: buffer %q is device memory, which is not written beside running work (%w): call Sync first, or write a host buffer", b.Name, ErrBusy)
	}
	hw, ok := s.d.(device.HostWriter)
	if !ok {
		return fmt.Errorf("executor: Write: device session %T cannot write beside running work (%w): call Sync first", s.d, ErrBusy)
	}
	if err := hw.WriteHost(b, data); err != nil {
		return fmt.Errorf("executor: write %q: %w", b.Name, err)
	}
	return nil
}
