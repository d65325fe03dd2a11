package verify

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// forks follows, through a body plan's steps, which streams are ordered
// after the body's entry: the entry stream from its start, another stream
// once it waits on an event recorded on a stream that was. It does
// nothing for a plan that is not a body's.
type forks struct {
	v           *verifier
	forked      []bool  // by stream
	eventForked []bool  // by event: recorded on a forked stream
	last        []int32 // by stream: the last op it ran, -1 for none
}

func newForks(v *verifier) *forks {
	if !v.body {
		return nil
	}
	f := &forks{v: v, forked: make([]bool, v.streams), eventForked: make([]bool, v.p.Events), last: make([]int32, v.streams)}
	if v.streams > 0 {
		f.forked[0] = true
	}
	for s := range f.last {
		f.last[s] = -1
	}
	return f
}

// step follows one step, before the verifier checks it.
func (f *forks) step(st plan.Step) {
	if f == nil {
		return
	}
	switch st.Kind {
	case plan.Record:
		f.eventForked[st.Event] = f.forked[st.Stream]
	case plan.Wait:
		f.forked[st.Stream] = f.forked[st.Stream] || f.eventForked[st.Event]
	case plan.Run:
		f.last[st.Stream] = st.Op
	}
}

// check fails when op id, about to run, is not ordered after the entry.
func (f *forks) check(id int32) error {
	if f == nil || f.forked[f.v.stream[id]] {
		return nil
	}
	v := f.v
	return &Error{Kind: OutsideBody, Ops: []string{v.opName(id)},
		Msg: fmt.Sprintf("op %q runs on %s, which is not forked from the entry stream %s before it: it may start before the body does",
			v.opName(id), v.streamName(v.stream[id]), v.streamName(0))}
}

// joined fails when the entry stream, at its end, is not ordered after
// the last op of every other stream; clock is the verifier's vector
// clocks at the end of the steps.
func (f *forks) joined(clock []int32) error {
	if f == nil {
		return nil
	}
	ns := f.v.streams
	for t := 1; t < ns; t++ {
		if runs := clock[t*ns+t]; runs > 0 && clock[t] < runs {
			v := f.v
			op := f.last[t]
			return &Error{Kind: OutsideBody, Ops: []string{v.opName(op)},
				Msg: fmt.Sprintf("op %q, the last on %s, is not joined back into the entry stream %s: the body may end before it",
					v.opName(op), v.streamName(int32(t)), v.streamName(0))}
		}
	}
	return nil
}

// checkBodies checks that every control op has a plan for each of its
// bodies, for nothing else, and verifies each, naming the control op in
// what it finds.
func (v *verifier) checkBodies() error {
	for id := range v.p.Bodies {
		if id < 0 || id >= len(v.ops) || v.ops[id].Control == nil {
			return malformed("the plan has bodies for op %d, which is no loop or branch of the graph", id)
		}
	}
	for id, op := range v.ops {
		bodies := op.Bodies()
		if op.Control == nil && op.Kind.Info().Body == dag.NoBody {
			continue
		}
		plans := v.p.Bodies[id]
		if len(plans) != len(bodies) || len(bodies) == 0 {
			return &Error{Kind: Malformed, Ops: []string{op.Name},
				Msg: fmt.Sprintf("%s %q has %d bodies and the plan %d", op.Kind, op.Name, len(bodies), len(plans))}
		}
		for i, bp := range plans {
			if bp == nil || bp.Graph != bodies[i] {
				return &Error{Kind: Malformed, Ops: []string{op.Name},
					Msg: fmt.Sprintf("%s %q: the plan of %s is not of its graph", op.Kind, op.Name, plan.BodyName(op, i))}
			}
			if err := verify(bp, true); err != nil {
				if ve, ok := errors.AsType[*Error](err); ok {
					return &Error{Kind: ve.Kind, Ops: ve.Ops, Msg: fmt.Sprintf("%s %q, %s: %s", op.Kind, op.Name, plan.BodyName(op, i), ve.Msg)}
				}
				return err
			}
		}
	}
	return nil
}
