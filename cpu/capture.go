package cpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// capturer is a session's graph capture: the capture in progress and
// the graphs captured.
type capturer struct {
	memory *memory
	sched  *scheduler

	capturing  *graph   // the capture in progress, if any
	graphs     []*graph // by number; nil once destroyed
	forkEvents []int32  // by stream: the event a capture on it forks with
	joinEvents []int32  // by stream: the event it joins a capture with
}

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
func (cp *capturer) captureEvents(origin int) (fork int32) {
	for len(cp.forkEvents) < len(cp.sched.streams) {
		cp.forkEvents = append(cp.forkEvents, cp.sched.internalEvent())
		cp.joinEvents = append(cp.joinEvents, cp.sched.internalEvent())
	}
	return cp.forkEvents[origin]
}

func (sc *scheduler) internalEvent() int32 {
	sc.events = append(sc.events, event{})
	return int32(len(sc.events) - 1)
}

// BeginCapture starts recording the work submitted to every stream, forked
// from stream origin.
func (b *Session) BeginCapture(origin int) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.checkStep(origin, -1); err != nil {
		return err
	}
	if b.capt.capturing != nil {
		return fmt.Errorf("cpu: BeginCapture: stream %d is capturing already; call EndCapture first", b.capt.capturing.origin)
	}
	fork := b.capt.captureEvents(origin)
	g := &graph{origin: origin}
	g.steps = append(g.steps, captured{stream: int32(origin), in: instr{kind: record, event: fork}})
	for i := range b.sched.streams {
		if i != origin && !b.ctl.servesBody(i) { // control.go: a body's streams fork from its loop
			g.steps = append(g.steps, captured{stream: int32(i), in: instr{kind: wait, event: fork}})
		}
	}
	b.capt.capturing = g
	return nil
}

// EndCapture joins every stream back into origin, ends the recording and
// returns the graph's number.
func (b *Session) EndCapture(origin int) (int, error) {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return -1, err
	}
	g := b.capt.capturing
	if g == nil || g.origin != origin {
		return -1, fmt.Errorf("cpu: EndCapture: stream %d is not capturing", origin)
	}
	for i := range b.sched.streams {
		if i != origin && !b.ctl.servesBody(i) {
			join := b.capt.joinEvents[i]
			g.steps = append(g.steps,
				captured{stream: int32(i), in: instr{kind: record, event: join}},
				captured{stream: int32(origin), in: instr{kind: wait, event: join}})
		}
	}
	g.steps = slices.Clip(g.steps)
	b.capt.capturing = nil
	b.capt.graphs = append(b.capt.graphs, g)
	return len(b.capt.graphs) - 1, nil
}

// addCaptured adds a step to the capture in progress; the caller holds the lock.
func (cp *capturer) addCaptured(stream int, in instr) {
	cp.capturing.steps = append(cp.capturing.steps, captured{stream: int32(stream), in: in})
}

func (cp *capturer) graph(i int) (*graph, error) {
	if i < 0 || i >= len(cp.graphs) || cp.graphs[i] == nil {
		return nil, fmt.Errorf("cpu: graph %d does not exist (destroyed, or never captured)", i)
	}
	return cp.graphs[i], nil
}

// Instantiate makes graph i launchable.
func (b *Session) Instantiate(i int) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	g, err := b.capt.graph(i)
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
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if b.capt.capturing != nil {
		return errors.New("cpu: LaunchGraph during a capture")
	}
	g, err := b.capt.graph(gi)
	if err != nil {
		return err
	}
	if !g.ready {
		return fmt.Errorf("cpu: graph %d is not instantiated", gi)
	}
	if stream != g.origin {
		return fmt.Errorf("cpu: graph %d replays on stream %d, where it was captured, not on stream %d", gi, g.origin, stream)
	}
	b.timer.launches++
	for _, st := range g.steps {
		in := st.in
		in.replay = b.timer.launches // the launch's number + 1
		switch in.kind {
		case record:
			ev := b.sched.event(in.event)
			ev.recorded++
			in.gen = ev.recorded
		case wait:
			in.gen = b.sched.event(in.event).recorded
		}
		b.sched.enqueue(b.sched.streams[st.stream], in)
	}
	return nil
}

// UpdateGraph replaces instantiated graph gi's steps with those of freshly
// captured graph fresh, which it uses up. It reports an update in place
// when the two have the same shape (the same steps on the same streams,
// only the ops' arguments or buffers differ), as cuGraphExecUpdate would.
func (b *Session) UpdateGraph(gi, fresh int) (bool, error) {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return false, err
	}
	g, err := b.capt.graph(gi)
	if err != nil {
		return false, err
	}
	f, err := b.capt.graph(fresh)
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
	b.capt.graphs[fresh] = nil
	return inPlace, nil
}

// DestroyGraph releases graph gi.
func (b *Session) DestroyGraph(gi int) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if _, err := b.capt.graph(gi); err != nil {
		return err
	}
	b.capt.graphs[gi] = nil
	return nil
}

// Graphs reports how many captured graphs the backend holds, and how many
// events it made for forking and joining streams in captures.
func (b *Session) Graphs() (graphs, events int) {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	for _, g := range b.capt.graphs {
		if g != nil {
			graphs++
		}
	}
	return graphs, len(b.capt.forkEvents) + len(b.capt.joinEvents)
}

// checkVariant accepts op as a stand-in for the open graph's op of the same
// ID: the same kind, kernel and number of accesses, to buffers of the
// graph placed alike, as captures submit after executor.SetArg or
// executor.Rebind. The caller holds the lock.
func (cp *capturer) checkVariant(op *dag.Op) error {
	orig := cp.memory.g.Ops[op.ID]
	bad := func(why string) error {
		return fmt.Errorf("cpu: op %q is neither op %d of the opened graph (%q) nor a variant of it: %s", op.Name, op.ID, orig.Name, why)
	}
	if op.Kind != orig.Kind || len(op.Access) != len(orig.Access) {
		return bad("its kind or number of accesses differs")
	}
	if err := checkOp(cp.memory.g, op); err != nil {
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
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	switch {
	case buf == nil || buf.ID < 0 || buf.ID >= len(b.memory.g.Buffers) || b.memory.g.Buffers[buf.ID] != buf:
		return fmt.Errorf("cpu: Write: buffer %v is not one of the opened graph's", buf)
	case buf.Temporary:
		return fmt.Errorf("cpu: Write: buffer %q is temporary; it lives only inside a run (write a persistent buffer and copy it in)", buf.Name)
	case int64(len(data)) != buf.Size:
		return fmt.Errorf("cpu: Write: %d bytes for buffer %q of %d bytes: write the whole buffer", len(data), buf.Name, buf.Size)
	case b.sched.pending > 0 && !beside:
		return fmt.Errorf("cpu: Write: buffer %q: %w; call Sync first", buf.Name, device.ErrBusy)
	}
	copy(b.memory.mem[buf.ID], data)
	return nil
}
