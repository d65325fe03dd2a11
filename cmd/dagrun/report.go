package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/spec"
)

// load loads the spec at path and prints its problems, errors and warnings
// together in file order. A spec with errors comes back as reported.
func (c *cli) load(path string) (*spec.Spec, error) {
	s, err := spec.Load(path)
	errs := spec.Errors(err)
	if err != nil && len(errs) == 0 {
		return nil, err // the file could not be read
	}
	type problem struct {
		pos  spec.Position
		text string
	}
	var problems []problem
	for _, e := range errs {
		problems = append(problems, problem{e.Pos, e.Error()})
	}
	if s != nil {
		for _, w := range s.Warnings {
			problems = append(problems, problem{w.Pos, fmt.Sprintf("%s: warning: %s", w.Pos, withHint(w))})
		}
	}
	slices.SortStableFunc(problems, func(a, b problem) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Col, b.pos.Col))
	})
	for _, p := range problems {
		fmt.Fprintln(c.stderr, p.text)
	}
	if err != nil {
		return nil, reported{}
	}
	return s, nil
}

func withHint(e *spec.Error) string {
	if e.Hint == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s (%s)", e.Msg, e.Hint)
}

// opFailure prints an error of a run, placed at the op's declaration in
// the spec when it names an op.
func (c *cli) opFailure(s *spec.Spec, err error) error {
	var oe *dag.OpError
	if errors.As(err, &oe) {
		if pos, ok := s.OpPos(oe.Op); ok {
			fmt.Fprintf(c.stderr, "%s: op %q failed: %v\n", pos, oe.Op, oe.Err)
			return reported{}
		}
	}
	return err
}

// captureFailure prints why the plan of s cannot be captured as a graph,
// each problem placed at its op's declaration, and how to run eagerly
// instead: flag tells whether --graph asked for the graph, else the spec.
func (c *cli) captureFailure(s *spec.Spec, err error, flag bool) error {
	eager := "drop --graph to run eagerly"
	if !flag {
		eager = "set run.graph: false or pass --graph=false to run eagerly"
	}
	errs := dag.Errors(err)
	if len(errs) == 0 {
		return fmt.Errorf("cannot capture the run as a graph: %w (%s)", err, eager)
	}
	for _, e := range errs {
		if pos, ok := s.OpPos(e.Op); ok && e.Op != "" {
			msg := e.Msg
			if e.Hint != "" {
				msg = fmt.Sprintf("%s (%s)", e.Msg, e.Hint)
			}
			fmt.Fprintf(c.stderr, "%s: op %q cannot be captured in a graph: %s\n", pos, e.Op, msg)
		} else {
			fmt.Fprintf(c.stderr, "%s: cannot be captured in a graph: %v\n", s.File, e)
		}
	}
	fmt.Fprintf(c.stderr, "%s: the run cannot be captured as a graph; fix the ops above, or %s\n", s.File, eager)
	return reported{}
}
