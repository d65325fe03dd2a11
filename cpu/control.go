package cpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// controller runs a session's loops and branches.
type controller struct {
	memory *memory
	sched  *scheduler

	controls    map[int]*control // by the op's index
	ctlEvents   []event          // the controls' entry and exit events, numbered -1, -2, ...
	bodyStreams []bool           // by stream: it serves a body
	failBody    *bodyFault       // FailInBody's, if any
}

// Loops and branches (device.Controller). A control op never reaches a
// worker: when it comes to the head of its stream, advance expands it.
// It reads the flag and, for a pass of a body, puts in its place on its
// stream a record of the op's entry event, a wait on its exit event and,
// for a loop, the next check of its flag (an again instruction); and it
// appends to the body's entry stream a wait on the entry, the body's
// steps, and a record of the exit, as if they were submitted then. Event
// generations make the same events and steps serve every iteration, and
// every replay. A body's streams run nothing else.

var _ device.Controller = (*Session)(nil)

// again checks a loop's flag once more, gen iterations done.
const again instrKind = fail + 1

// control is what the session keeps of one loop or branch.
type control struct {
	bodies [][]device.Step // as SetBodies gave them
	// entry and exit are the session's own events (numbered below 0)
	// with which the op's stream forks a pass and waits for its end.
	entry, exit int32
}

func isControl(op *dag.Op) bool { return op != nil && op.Kind.Info().Body != dag.NoBody }

// event is event number i: one made by NewEvent, or below 0 one of the
// session's own for loops and branches, which the caller's numbering of
// its events never sees.
func (sc *scheduler) event(i int32) *event {
	if i < 0 {
		return &sc.ctl.ctlEvents[-1-i]
	}
	return &sc.events[i]
}

// SetBodies gives the session the bodies of control op op as planned:
// each body's steps, on streams and events made for it alone.
func (b *Session) SetBodies(op *dag.Op, bodies [][]device.Step) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if !isControl(op) || b.memory.g.OpAt(b.memory.index(op)) != op {
		return fmt.Errorf("cpu: SetBodies: %v is no loop or branch of the opened graph", op)
	}
	if want := len(op.Bodies()); len(bodies) != want {
		return fmt.Errorf("cpu: SetBodies: the %s %s has %d bodies, not %d", op.Kind, op.Name, want, len(bodies))
	}
	for i, steps := range bodies {
		if err := b.ctl.checkBody(op.Bodies()[i], steps); err != nil {
			return fmt.Errorf("cpu: SetBodies: the %s %s: %w", op.Kind, op.Name, err)
		}
	}
	for _, steps := range bodies {
		for _, st := range steps {
			for len(b.ctl.bodyStreams) <= st.Stream {
				b.ctl.bodyStreams = append(b.ctl.bodyStreams, false)
			}
			b.ctl.bodyStreams[st.Stream] = true
		}
	}
	if b.ctl.controls == nil {
		b.ctl.controls = map[int]*control{}
	}
	c := b.ctl.controls[b.memory.index(op)]
	if c == nil {
		c = &control{entry: b.ctl.controlEvent(), exit: b.ctl.controlEvent()}
		b.ctl.controls[b.memory.index(op)] = c
	}
	c.bodies = bodies
	return nil
}

// checkBody checks that steps name streams and events of the session
// and run the ops of body g.
func (ct *controller) checkBody(g *dag.Graph, steps []device.Step) error {
	for i, st := range steps {
		if st.Stream < 0 || st.Stream >= len(ct.sched.streams) {
			return fmt.Errorf("step %d: stream %d does not exist", i, st.Stream)
		}
		switch st.Kind {
		case device.RunStep:
			if st.Op == nil || st.Op.ID < 0 || st.Op.ID >= len(g.Ops) || g.Ops[st.Op.ID] != st.Op {
				return fmt.Errorf("step %d runs an op that is not of its body", i)
			}
		case device.RecordStep, device.WaitStep:
			if st.Event < 0 || st.Event >= len(ct.sched.events) {
				return fmt.Errorf("step %d: event %d does not exist", i, st.Event)
			}
		default:
			return fmt.Errorf("step %d has kind %d", i, st.Kind)
		}
	}
	return nil
}

// servesBody says whether stream i serves a body: a capture neither forks
// nor joins it, as its loop or branch does that in every pass.
func (ct *controller) servesBody(i int) bool { return i < len(ct.bodyStreams) && ct.bodyStreams[i] }

func (ct *controller) controlEvent() int32 {
	ct.ctlEvents = append(ct.ctlEvents, event{})
	return int32(-len(ct.ctlEvents))
}

// expand does the control op at the head of s, done iterations of it run
// (0 when it is reached). It runs under the lock, from advance, which
// goes on with what is at the head of s then.
func (ct *controller) expand(s *stream, done uint64) {
	in := s.q[s.head]
	op := in.op
	consume := func() {
		s.head++
		ct.sched.finish()
	}
	fail := func(err error) {
		ct.sched.abort(&dag.OpError{Op: op.Name, Err: err})
		consume()
	}
	c := ct.controls[ct.memory.index(op)]
	if c == nil {
		fail(fmt.Errorf("cpu: the %s's bodies were never given (device.Controller.SetBodies)", op.Kind))
		return
	}
	flag, err := ct.readFlag(op)
	if err != nil {
		fail(err)
		return
	}
	loop := op.Kind.Info().Body == dag.Loop
	var body []device.Step
	switch {
	case loop && flag == 0:
		consume()
		return
	case loop && op.Control.Max > 0 && done >= uint64(op.Control.Max):
		fail(op.Control.MaxReached())
		return
	case loop, flag != 0:
		body = c.bodies[0]
	case len(c.bodies) > 1:
		body = c.bodies[1]
	default:
		consume()
		return
	}
	if len(body) == 0 {
		if loop { // nothing can clear the flag
			fail(errors.New("its body is empty and its flag is set: the loop would never end"))
			return
		}
		consume()
		return
	}

	// In the op's place: fork the pass, wait for its end, check again.
	entry, exit := ct.sched.event(c.entry), ct.sched.event(c.exit)
	entry.recorded++
	head := []instr{
		{kind: record, event: c.entry, gen: entry.recorded, replay: in.replay},
		{kind: wait, event: c.exit, gen: exit.recorded + 1, replay: in.replay},
	}
	if loop {
		head = append(head, instr{kind: again, op: op, gen: done + 1, replay: in.replay})
	}
	s.q[s.head] = head[0]
	s.q = slices.Insert(s.q, s.head+1, head[1:]...)
	ct.sched.pending += len(head) - 1

	// The pass, as if submitted now.
	first := ct.sched.streams[body[0].Stream]
	ct.sched.enqueue(first, instr{kind: wait, event: c.entry, gen: entry.recorded, replay: in.replay})
	for _, st := range body {
		ct.enqueueStep(st, in.replay)
	}
	exit.recorded++
	ct.sched.enqueue(first, instr{kind: record, event: c.exit, gen: exit.recorded, replay: in.replay})
}

// enqueueStep enqueues a body's step as Run, Record or Wait would, in
// replay (0: an eager run). An op that FailInBody names fails in eager
// runs instead of running.
func (ct *controller) enqueueStep(st device.Step, replay int64) {
	in := instr{replay: replay}
	switch st.Kind {
	case device.RunStep:
		in.kind, in.op = run, st.Op
		if replay == 0 && ct.failBody != nil && ct.failBody.op == st.Op {
			in.kind, in.fault = fail, ct.failBody.err
		}
	case device.RecordStep:
		ev := &ct.sched.events[st.Event]
		ev.recorded++
		in.kind, in.event, in.gen = record, int32(st.Event), ev.recorded
	case device.WaitStep:
		in.kind, in.event, in.gen = wait, int32(st.Event), ct.sched.events[st.Event].recorded
	}
	ct.sched.enqueue(ct.sched.streams[st.Stream], in)
}

// readFlag reads the i32 flag of control op op, little-endian as the
// session keeps every buffer.
func (ct *controller) readFlag(op *dag.Op) (int32, error) {
	a := op.Access[0]
	m := ct.memory.mem[a.Buf.ID]
	if m == nil {
		return 0, fmt.Errorf("its flag %s is a temporary that is not allocated", a.Buf.Name)
	}
	return int32(binary.LittleEndian.Uint32(m[a.Offset : a.Offset+4])), nil
}

// bodyFault is the failure FailInBody injects.
type bodyFault struct {
	op  *dag.Op
	err error
}

// FailInBody makes op, an op of a loop's or branch's body, fail with err
// whenever an eager run reaches it (device.BodyFailer), as Fail does for
// the ops the executor submits; replays run it as usual.
func (b *Session) FailInBody(op *dag.Op, err error) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if op == nil || err == nil || op.Index < len(b.memory.g.Ops) || b.memory.g.OpAt(op.Index) != op {
		return errors.New("cpu: FailInBody: give an op of a body of the opened graph and its error")
	}
	b.ctl.failBody = &bodyFault{op: op, err: err}
	return nil
}

// controlImpl is the kind table's entry for loops and branches: advance
// expands them, so no worker ever executes one.
var controlImpl = kindImpl{
	check: func(op *dag.Op) string {
		switch {
		case op.Control == nil || op.Control.Body == nil:
			return fmt.Sprintf("%s has no body", op.Kind)
		case len(op.Access) == 0 || op.Access[0].Size != 4:
			return fmt.Sprintf("%s has no flag of one i32 element", op.Kind)
		}
		return ""
	},
	exec: func(_ context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, _ [][]byte) ([]byte, error) {
		return nil, fmt.Errorf("cpu: a %s runs through its bodies, not as one op", op.Kind)
	},
}
