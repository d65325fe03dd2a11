package executor

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Loops and branches (dag.While, dag.If): the executor submits a control
// op like any other, and the backend runs its bodies. When the session
// opens, every body's plan gets streams and events of its own in the
// device session, after the plan's, and its steps, in the session's
// numbering, go to the backend through device.Controller.SetBodies. The
// executor never submits a body's steps itself.

// checkController refuses, before anything is made, a plan with loops or
// branches on a backend that cannot run them, naming the first.
func checkController(d device.Session, p *planner.Plan) error {
	if len(p.Bodies) == 0 {
		return nil
	}
	if _, ok := d.(device.Controller); ok {
		return nil
	}
	op := p.Graph.Ops[slices.Min(controlIDs(p))]
	return &dag.OpError{Op: op.Name, Err: fmt.Errorf("executor: the %s cannot run: device session %T runs no loops or branches (device.Controller)", op.Kind, d)}
}

// controlIDs are the IDs of p's control ops that have bodies, in order.
func controlIDs(p *planner.Plan) []int {
	ids := make([]int, 0, len(p.Bodies))
	for id := range p.Bodies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// made counts the streams and events a session made in its device
// session, the plan's, then its bodies' (setBodies), then the joins of
// External.Done (join), and makes more.
type made struct {
	d               device.Session
	streams, events int
	joins           []int // events that join the streams for External.Done
}

// plan makes one stream per plan stream (with its device and priority)
// and one event per plan event.
func (m *made) plan(p *planner.Plan) error {
	for _, st := range p.Streams {
		if err := m.d.NewStream(st.Device, st.Priority); err != nil {
			return fmt.Errorf("executor: create stream %s: %w", streamName(st), err)
		}
	}
	for e := range p.Events {
		if err := m.d.NewEvent(); err != nil {
			return fmt.Errorf("executor: create event %d: %w", e, err)
		}
	}
	m.streams, m.events = len(p.Streams), p.Events
	return nil
}

// setBodies makes the streams and events of every body of p, at every
// depth, and hands each control op's bodies to the backend.
func (m *made) setBodies(p *planner.Plan) error {
	for _, id := range controlIDs(p) {
		op := p.Graph.Ops[id]
		if op == nil || len(p.Bodies[id]) != len(op.Bodies()) {
			return &dag.OpError{Op: fmt.Sprintf("#%d", id), Err: fmt.Errorf("executor: the plan's bodies do not match the op's; make plans with planner.New")}
		}
		bodies := make([][]device.Step, len(p.Bodies[id]))
		for i, body := range p.Bodies[id] {
			steps, err := m.bodySteps(op, body)
			if err != nil {
				return err
			}
			bodies[i] = steps
			// Deeper loops and branches are the backend's to run as well.
			if err := m.setBodies(body); err != nil {
				return err
			}
		}
		if err := m.d.(device.Controller).SetBodies(op, bodies); err != nil {
			return &dag.OpError{Op: op.Name, Err: fmt.Errorf("executor: give the backend the bodies of the %s: %w", op.Kind, err)}
		}
	}
	return nil
}

// bodySteps makes the streams and events of one body's plan and returns
// its steps in the session's numbering.
func (m *made) bodySteps(op *dag.Op, body *planner.Plan) ([]device.Step, error) {
	if body == nil || body.Graph == nil || !slices.Contains(op.Bodies(), body.Graph) {
		return nil, &dag.OpError{Op: op.Name, Err: fmt.Errorf("executor: a body's plan is not of the %s's bodies; make plans with planner.New", op.Kind)}
	}
	if err := checkPlan(body); err != nil {
		return nil, &dag.OpError{Op: op.Name, Err: err}
	}
	firstStream, firstEvent := m.streams, m.events
	for _, st := range body.Streams {
		if err := m.d.NewStream(st.Device, st.Priority); err != nil {
			return nil, &dag.OpError{Op: op.Name, Err: fmt.Errorf("executor: create body stream %s: %w", streamName(st), err)}
		}
		m.streams++
	}
	for e := range body.Events {
		if err := m.d.NewEvent(); err != nil {
			return nil, &dag.OpError{Op: op.Name, Err: fmt.Errorf("executor: create body event %d: %w", e, err)}
		}
		m.events++
	}
	steps := make([]device.Step, len(body.Steps))
	for i, st := range body.Steps {
		d := device.Step{Stream: firstStream + int(st.Stream), Event: firstEvent + int(st.Event)}
		switch st.Kind {
		case planner.Run:
			d.Kind, d.Op, d.Event = device.RunStep, body.Graph.Ops[st.Op], 0
		case planner.Record:
			d.Kind = device.RecordStep
		case planner.Wait:
			d.Kind = device.WaitStep
		}
		steps[i] = d
	}
	return steps, nil
}
