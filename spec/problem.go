package spec

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
)

// Problem is one thing wrong, as a flat record for a report: in a spec at
// file:line:column, with an op, or with no place at all (a command's own).
// Text and JSON show the same fields; an op is named as the spec's graph
// names it.
type Problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Op      string `json:"op,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// At places p at pos.
func (p Problem) At(pos Position) Problem {
	p.File, p.Line, p.Column = pos.File, pos.Line, pos.Col
	return p
}

// Text is p as one line: "file:line:col: op "NAME" message (hint)", with
// prefix instead of the place when p has none.
func (p Problem) Text(prefix string) string {
	var b strings.Builder
	switch {
	case p.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", human.Quote(p.File), p.Line, p.Column)
	case p.File != "":
		fmt.Fprintf(&b, "%s: ", human.Quote(p.File))
	default:
		b.WriteString(prefix)
	}
	if p.Op != "" {
		fmt.Fprintf(&b, "op %q ", p.Op)
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		fmt.Fprintf(&b, " (%s)", p.Hint)
	}
	return b.String()
}

// Problem is e as a Problem.
func (e *Error) Problem() Problem {
	return Problem{Message: e.Msg, Hint: e.Hint}.At(e.Pos)
}

// OpProblem is msg about the op called op, placed where s declares it
// (OpPos), else at s's file. An op the planner fused ("fc1+bias1+gelu",
// planner.Plan.Parts) is placed at its first part, the gemm.
func (s *Spec) OpProblem(op, msg string) Problem {
	p := Problem{File: s.File, Op: op, Message: msg}
	if pos, ok := s.OpPos(op); ok {
		p = p.At(pos)
	} else if gemm, _, fused := strings.Cut(op, "+"); fused {
		if pos, ok := s.OpPos(gemm); ok {
			p = p.At(pos)
		}
	}
	return p
}

// WarningProblems are s's warnings as Problems, in file order.
func (s *Spec) WarningProblems() []Problem {
	var ws []Problem
	for _, w := range s.Warnings {
		ws = append(ws, w.Problem())
	}
	return ws
}

// BufferPos returns where s tells of buffer b: a temporary at its alloc op
// (which the spec places at the buffer), a persistent buffer at its entry
// in the outputs or else at the first op that uses it.
func (s *Spec) BufferPos(b *dag.Buffer) (Position, bool) {
	if !b.Temporary {
		for _, out := range s.Outputs {
			if out.Buffer == b && out.Pos.Line > 0 {
				return out.Pos, true
			}
		}
	}
	for _, op := range s.Graph.Ops {
		if b.Temporary && op.Kind != dag.Alloc {
			continue
		}
		for _, a := range op.Access {
			if a.Buf == b {
				return s.OpPos(op.Name)
			}
		}
	}
	return Position{}, false
}
