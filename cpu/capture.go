package cpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Graph capture on the CPU has the semantics of CUDA stream capture:
// between BeginCapture and EndCapture, Run, Record and Wait calls are
// recorded into a list instead of run; the list starts with a fork (every
// stream waits for the origin stream) and ends with a join (the origin
// waits for every stream). A launch replays the frozen list: nothing is
// planned or checked again, and events count afresh in each replay, as
// recorded events of a CUDA graph do.

// captured is one step of a captured graph.
type captured struct {
	stream int32
	in     instr // gen is not used: replays number the records afresh
}

// graph is a captured list of steps.
type graph struct {
	origin int
	steps  []captured
	ready  bool // instantiated: launchable
}

// captureEvents returns the fork event of origin and the join event of
// every stream, making them on first use. Each is only ever recorded on one
// stream, so its generations are reached in order, however many graphs
// share it.
func (b *Session) captureEvents(origin int) (fork int32) {
	for len(b.forkEvents) < len(b.streams) {
		b.forkEvents = append(b.forkEvents, b.internalEvent())
		b.joinEvents = append(b.joinEvents, b.internalEvent())
	}
	return b.forkEvents[origin]
}

func (b *Session) internalEvent() int32 {
	b.events = append(b.events, event{})
	return int32(len(b.events) - 1)
}

// BeginCapture starts recording the work submitted to every stream, forked
// from stream origin.
func (b *Session) BeginCapture(origin int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(origin, -1); err != nil {
		return err
	}
	if b.capturing != nil {
		return fmt.Errorf("cpu: BeginCapture: stream %d is capturing already; call EndCapture first", b.capturing.origin)
	}
	fork := b.captureEvents(origin)
	g := &graph{origin: origin}
	g.steps = append(g.steps, captured{stream: int32(origin), in: instr{kind: record, event: fork}})
	for i := range b.streams {
		if i != origin && !b.servesBody(i) { // control.go: a body's streams fork from its loop
			g.steps = append(g.steps, captured{stream: int32(i), in: instr{kind: wait, event: fork}})
		}
	}
	b.capturing = g
	return nil
}

// EndCapture joins every stream back into origin, ends the recording and
// returns the graph's number.
func (b *Session) EndCapture(origin int) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return -1, err
	}
	g := b.capturing
	if g == nil || g.origin != origin {
		return -1, fmt.Errorf("cpu: EndCapture: stream %d is not capturing", origin)
	}
	for i := range b.streams {
		if i != origin && !b.servesBody(i) {
			join := b.joinEvents[i]
			g.steps = append(g.steps,
				captured{stream: int32(i), in: instr{kind: record, event: join}},
				captured{stream: int32(origin), in: instr{kind: wait, event: join}})
		}
	}
	g.steps = slices.Clip(g.steps)
	b.capturing = nil
	b.graphs = append(b.graphs, g)
	return len(b.graphs) - 1, nil
}

// addCaptured adds a step to the capture in progress; the caller holds the lock.
func (b *Session) addCaptured(stream int, in instr) {
	b.capturing.steps = append(b.capturing.steps, captured{stream: int32(stream), in: in})
}

func (b *Session) graph(i int) (*graph, error) {
	if i < 0 || i >= len(b.graphs) || b.graphs[i] == nil {
		return nil, fmt.Errorf("cpu: graph %d does not exist (destroyed, or never captured)", i)
	}
	return b.graphs[i], nil
}

// Instantiate makes graph i launchable.
func (b *Session) Instantiate(i int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	g, err := b.graph(i)
	if err != nil {
		return err
	}
	g.ready = true
	return nil
}

// LaunchGraph enqueues one replay of graph gi. It replays on the stream it
// was captured on, which must be stream. Its ops' spans carry the launch's
// number (ReplaySpans).
func (b *Session) LaunchGraph(gi, stream int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if b.capturing != nil {
		return errors.New("cpu: LaunchGraph during a capture")
	}
	g, err := b.graph(gi)
	if err != nil {
		return err
	}
	if !g.ready {
		return fmt.Errorf("cpu: graph %d is not instantiated", gi)
	}
	if stream != g.origin {
		return fmt.Errorf("cpu: graph %d replays on stream %d, where it was captured, not on stream %d", gi, g.origin, stream)
	}
	b.launches++
	for _, st := range g.steps {
		in := st.in
		in.replay = b.launches // the launch's number + 1
		switch in.kind {
		case record:
			ev := b.event(in.event)
			ev.recorded++
			in.gen = ev.recorded
		case wait:
			in.gen = b.event(in.event).recorded
		}
		b.enqueue(b.streams[st.stream], in)
	}
	return nil
}

// UpdateGraph replaces instantiated graph gi's steps with those of freshly
// captured graph fresh, which it uses up. It reports an update in place
// when the two have the same shape (the same steps on the same streams,
// only the ops' arguments or buffers differ), as cuGraphExecUpdate would.
func (b *Session) UpdateGraph(gi, fresh int) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return false, err
	}
	g, err := b.graph(gi)
	if err != nil {
		return false, err
	}
	f, err := b.graph(fresh)
	if err != nil {
		return false, err
	}
	if gi == fresh || !g.ready || f.ready {
		return false, fmt.Errorf("cpu: UpdateGraph(%d, %d): the first must be instantiated, the second freshly captured", gi, fresh)
	}
	inPlace := slices.EqualFunc(g.steps, f.steps, func(x, y captured) bool {
		return x.stream == y.stream && x.in.kind == y.in.kind && x.in.event == y.in.event &&
			(x.in.op == nil) == (y.in.op == nil) && (x.in.op == nil || x.in.op.ID == y.in.op.ID)
	})
	g.steps, g.origin = f.steps, f.origin
	b.graphs[fresh] = nil
	return inPlace, nil
}

// DestroyGraph releases graph gi.
func (b *Session) DestroyGraph(gi int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if _, err := b.graph(gi); err != nil {
		return err
	}
	b.graphs[gi] = nil
	return nil
}

// Graphs reports how many captured graphs the backend holds, and how many
// events it made for forking and joining streams in captures.
func (b *Session) Graphs() (graphs, events int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.graphs {
		if g != nil {
			graphs++
		}
	}
	return graphs, len(b.forkEvents) + len(b.joinEvents)
}

// checkVariant accepts op as a stand-in for the open graph's op of the same
// ID: the same kind, kernel and number of accesses, to buffers of the
// graph placed alike, as captures submit after executor.SetArg or
// executor.Rebind. The caller holds the lock.
func (b *Session) checkVariant(op *dag.Op) error {
	orig := b.g.Ops[op.ID]
	bad := func(why string) error {
		return fmt.Errorf("cpu: op %q is neither op %d of the opened graph (%q) nor a variant of it: %s", op.Name, op.ID, orig.Name, why)
	}
	if op.Kind != orig.Kind || len(op.Access) != len(orig.Access) {
		return bad("its kind or number of accesses differs")
	}
	if err := checkOp(b.g, op); err != nil {
		return bad(err.Error())
	}
	for i, a := range op.Access {
		if o := orig.Access[i].Buf; a.Buf.Placement != o.Placement || a.Buf.Temporary != o.Temporary {
			return bad(fmt.Sprintf("access %d is to %s, which is not placed like %s", i, a.Buf.Name, o.Name))
		}
	}
	k := op.Kernel()
	if k == nil {
		return nil
	}
	if k != orig.Kernel() || len(op.Launch.Args) != len(orig.Launch.Args) {
		return bad("it launches another kernel, or with another number of arguments")
	}
	// New scalars (matmul's sizes) must still fit the views.
	if _, err := builtin(op); err != nil {
		return bad(err.Error())
	}
	return nil
}

// WriteHost is Write for a host buffer while work runs: the caller (the
// executor) has made sure no work in flight uses buf.
func (b *Session) WriteHost(buf *dag.Buffer, data []byte) error {
	if buf != nil && !buf.Placement.Host() {
		return fmt.Errorf("cpu: WriteHost: buffer %q is device memory", buf.Name)
	}
	return b.write(buf, data, true)
}

// Write replaces the contents of persistent buffer buf with data, which
// must be buf's size; call it after Sync.
func (b *Session) Write(buf *dag.Buffer, data []byte) error { return b.write(buf, data, false) }

// write is Write; beside lets it write while work runs.
func (b *Session) write(buf *dag.Buffer, data []byte, beside bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	switch {
	case buf == nil || buf.ID < 0 || buf.ID >= len(b.g.Buffers) || b.g.Buffers[buf.ID] != buf:
		return fmt.Errorf("cpu: Write: buffer %v is not one of the opened graph's", buf)
	case buf.Temporary:
		return fmt.Errorf("cpu: Write: buffer %q is temporary; it lives only inside a run (write a persistent buffer and copy it in)", buf.Name)
	case int64(len(data)) != buf.Size:
		return fmt.Errorf("cpu: Write: %d bytes for buffer %q of %d bytes: write the whole buffer", len(data), buf.Name, buf.Size)
	case b.pending > 0 && !beside:
		return fmt.Errorf("cpu: Write: buffer %q: %w; call Sync first", buf.Name, device.ErrBusy)
	}
	copy(b.mem[buf.ID], data)
	return nil
}
