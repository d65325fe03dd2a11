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

// beside follows what a session's launched work may use, and waits for
// it: the device session, and the plan's graph's buffers by ID.
type beside struct {
	d    device.Session
	bufs []*dag.Buffer
	busy inFlight
}

// noteGraph adds the buffers a replay of g uses.
func (b *beside) noteGraph(g *Graph) {
	busy := b.buffers()
	for id, used := range g.used {
		if !used {
			continue
		}
		buf := b.bufs[id]
		if to, ok := g.state.bind[buf]; ok {
			buf = to
		}
		busy[buf.ID] = true
	}
}

// noteAll marks every buffer busy: work whose buffers the session does
// not follow (Enqueue's runs).
func (b *beside) noteAll() {
	busy := b.buffers()
	for i := range busy {
		busy[i] = true
	}
}

func (b *beside) buffers() inFlight {
	if b.busy == nil {
		b.busy = make(inFlight, len(b.bufs))
	}
	return b.busy
}

// sync waits for the device session's work; once it is done (ctx did not
// cut the wait short), nothing is in flight.
func (b *beside) sync(ctx context.Context) error {
	err := b.d.Sync(ctx)
	if ctx.Err() == nil {
		b.busy = nil
	}
	return err
}

// write writes buf while work is in flight, when that work does not use
// buf and buf is host memory the backend can write at once.
func (b *beside) write(buf *dag.Buffer, data []byte) error {
	switch {
	case b.busy[buf.ID]:
		return fmt.Errorf("executor: Write: buffer %q is used by the work still running (%w): call Sync first, or write a buffer it does not use (double buffering with Rebind)", buf.Name, ErrBusy)
	case !buf.Placement.Host():
		return fmt.Errorf("executor: Write: buffer %q is device memory, which is not written beside running work (%w): call Sync first, or write a host buffer", buf.Name, ErrBusy)
	}
	hw, ok := b.d.(device.HostWriter)
	if !ok {
		return fmt.Errorf("executor: Write: device session %T cannot write beside running work (%w): call Sync first", b.d, ErrBusy)
	}
	if err := hw.WriteHost(buf, data); err != nil {
		return fmt.Errorf("executor: write %q: %w", buf.Name, err)
	}
	return nil
}
