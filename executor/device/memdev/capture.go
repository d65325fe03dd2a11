package memdev

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// BeginCapture starts recording: the steps after it are kept, not done.
// Fork and join cost nothing here, every stream being done at once.
func (s *Session) BeginCapture(origin int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.checkStream("BeginCapture", origin); err != nil {
		return err
	}
	if s.capturing {
		return errors.New("memdev: BeginCapture: a capture is in progress")
	}
	s.capturing, s.recording = true, nil
	return nil
}

// EndCapture ends the recording and returns its graph's number.
func (s *Session) EndCapture(origin int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	if err := s.checkStream("EndCapture", origin); err != nil {
		return 0, err
	}
	if !s.capturing {
		return 0, errors.New("memdev: EndCapture: no capture is in progress")
	}
	s.capturing = false
	s.graphs = append(s.graphs, s.recording)
	s.ready = append(s.ready, false)
	s.recording = nil
	return len(s.graphs) - 1, nil
}

// Instantiate makes graph launchable.
func (s *Session) Instantiate(graph int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkGraph("Instantiate", graph); err != nil {
		return err
	}
	s.ready[graph] = true
	return nil
}

// LaunchGraph does graph's steps again, in the order they were captured.
func (s *Session) LaunchGraph(graph, stream int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkGraph("LaunchGraph", graph); err != nil {
		return err
	}
	if err := s.checkStream("LaunchGraph", stream); err != nil {
		return err
	}
	if !s.ready[graph] {
		return fmt.Errorf("memdev: LaunchGraph: graph %d is not instantiated", graph)
	}
	if s.capturing {
		return errors.New("memdev: LaunchGraph: not while capturing")
	}
	for _, st := range s.graphs[graph] {
		s.do(st)
	}
	return nil
}

// UpdateGraph makes graph do what fresh does, in place.
func (s *Session) UpdateGraph(graph, fresh int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := errors.Join(s.checkGraph("UpdateGraph", graph), s.checkGraph("UpdateGraph", fresh)); err != nil {
		return false, err
	}
	if !s.ready[graph] {
		return false, fmt.Errorf("memdev: UpdateGraph: graph %d is not instantiated", graph)
	}
	s.graphs[graph], s.graphs[fresh] = s.graphs[fresh], nil
	return true, nil
}

// DestroyGraph releases graph.
func (s *Session) DestroyGraph(graph int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkGraph("DestroyGraph", graph); err != nil {
		return err
	}
	s.graphs[graph], s.ready[graph] = nil, false
	return nil
}

func (s *Session) checkGraph(verb string, graph int) error {
	if err := s.usable(); err != nil {
		return err
	}
	if graph < 0 || graph >= len(s.graphs) || s.graphs[graph] == nil {
		return fmt.Errorf("memdev: %s: graph %d does not exist", verb, graph)
	}
	return nil
}

// SetBodies keeps the bodies of loop or branch op, as the executor planned
// them, for every Run of op.
func (s *Session) SetBodies(op *dag.Op, bodies [][]device.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if op == nil || op.Kind.Info().Body == dag.NoBody || s.g.OpAt(op.Index) != op {
		return fmt.Errorf("memdev: SetBodies: %v is no loop or branch of the opened graph", op)
	}
	if want := len(op.Bodies()); len(bodies) != want {
		return fmt.Errorf("memdev: SetBodies: the %s %s has %d bodies, not %d", op.Kind, op.Name, want, len(bodies))
	}
	for i, steps := range bodies {
		body := op.Bodies()[i]
		for j, st := range steps {
			if err := s.checkStream("SetBodies", st.Stream); err != nil {
				return fmt.Errorf("the %s %s, step %d: %w", op.Kind, op.Name, j, err)
			}
			bad := false
			switch st.Kind {
			case device.RunStep:
				bad = st.Op == nil || st.Op.ID < 0 || st.Op.ID >= len(body.Ops) || body.Ops[st.Op.ID] != st.Op
			case device.RecordStep, device.WaitStep:
				bad = st.Event < 0 || st.Event >= s.events
			default:
				bad = true
			}
			if bad {
				return fmt.Errorf("memdev: SetBodies: the %s %s, step %d: not an op of its body or an event of the session", op.Kind, op.Name, j)
			}
		}
	}
	s.bodies[op] = bodies
	return nil
}

// control runs loop or branch op: its flag is read before each pass, and
// a pass runs the body's ops in the order they were planned.
func (s *Session) control(op *dag.Op) error {
	bodies, ok := s.bodies[op]
	if !ok {
		return errors.New("its bodies were never given (device.Controller.SetBodies)")
	}
	flag := func() int32 {
		a := op.Access[0]
		return int32(binary.LittleEndian.Uint32(s.mem[a.Buf.ID][a.Offset:]))
	}
	if op.Kind.Info().Body == dag.Branch {
		switch {
		case flag() != 0:
			return s.pass(bodies[0])
		case len(bodies) > 1:
			return s.pass(bodies[1])
		}
		return nil
	}
	for n := int64(0); flag() != 0; n++ {
		if op.Control.Max > 0 && n == op.Control.Max {
			return fmt.Errorf("the loop ran its %d iterations (max) and its flag is still set", op.Control.Max)
		}
		if s.stop.Load() {
			return errors.New("the session was closed during the loop")
		}
		if err := s.pass(bodies[0]); err != nil {
			return err
		}
	}
	return nil
}

// pass runs one pass of a body; a failing op is named in the error.
func (s *Session) pass(steps []device.Step) error {
	for _, st := range steps {
		if st.Kind != device.RunStep {
			continue
		}
		if err := s.run(st.Op); err != nil {
			if _, named := errors.AsType[*dag.OpError](err); named {
				return err
			}
			return &dag.OpError{Op: st.Op.Name, Err: err}
		}
	}
	return nil
}
