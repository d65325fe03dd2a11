package job

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

// Problem is err, an error of planning or running s's program, placed
// where s tells of it: a plan the verifier refused (*verify.Error, a bug)
// at the first op it names, a run that admission control refused
// (*executor.MemoryError) at its largest buffer, an op's failure
// (*dag.OpError) at the op's declaration; any other error as it is, with
// no place.
func Problem(s *spec.Spec, err error) spec.Problem {
	if ve, ok := errors.AsType[*verify.Error](err); ok {
		p := spec.Problem{Message: "the plan failed verification: " + err.Error()}
		if len(ve.Ops) > 0 {
			p.Op = ve.Ops[0]
			if pos, ok := s.OpPos(p.Op); ok {
				p = p.At(pos)
			}
		}
		return p
	}
	if me, ok := errors.AsType[*executor.MemoryError](err); ok {
		p := spec.Problem{File: s.File, Message: me.Error()}
		if len(me.Buffers) > 0 {
			if pos, ok := s.BufferPos(me.Buffers[0]); ok {
				p = p.At(pos)
			}
		}
		return p
	}
	if oe, ok := errors.AsType[*dag.OpError](err); ok {
		return s.OpProblem(oe.Op, "failed: "+oe.Err.Error())
	}
	return spec.Problem{Message: err.Error()}
}

// CaptureProblems are the problems of s's plan that a graph cannot hold
// (executor.CheckCapture's), each placed at its op; nil when err lists
// none.
func CaptureProblems(s *spec.Spec, err error) []spec.Problem {
	var ps []spec.Problem
	for _, e := range dag.Errors(err) {
		p := spec.Problem{File: s.File, Message: "cannot be captured in a graph: " + e.Msg}
		if e.Op != "" {
			p = s.OpProblem(e.Op, p.Message)
		}
		p.Hint = e.Hint
		ps = append(ps, p)
	}
	return ps
}

// WorldProblem is Problem for an error of the ranks ps of a world, placed
// in the spec of the rank it names (*executor.RankError), which it returns:
// an op's problem names the rank ("rank 1: "). Where this process runs one
// rank of a world whose ranks disagree on their collectives, the first
// collective that differs is placed in its spec.
func WorldProblem(ps []*Program, err error) (*spec.Spec, spec.Problem) {
	s := ps[0].Spec
	prefix := ""
	if re, ok := errors.AsType[*executor.RankError](err); ok {
		for _, p := range ps {
			if p.Rank == re.Rank {
				s = p.Spec
			}
		}
		prefix = fmt.Sprintf("rank %d: ", re.Rank)
	}
	p := Problem(s, err)
	if p.Op != "" && !strings.HasPrefix(p.Message, prefix) {
		p.Message = prefix + p.Message
	}
	if len(ps) == 1 && p.Op == "" && errors.Is(err, comm.ErrMismatch) {
		if m := collectiveIndex.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			if op := nthCollective(s.Graph, n); op != nil {
				p = s.OpProblem(op.Name, err.Error())
			}
		}
	}
	return s, p
}

// collectiveIndex finds the number of the first collective the ranks
// disagree on in internal/comm's error, which reaches the other ranks as
// text.
var collectiveIndex = regexp.MustCompile(`(?:differ at|its) #(\d+)`)

// nthCollective is the n-th (from 1) op of g's collective sequence.
func nthCollective(g *dag.Graph, n int) *dag.Op {
	for _, op := range g.Ops {
		if !op.Kind.IsCollective() || op.Kind == dag.Send || op.Kind == dag.Recv {
			continue
		}
		if n--; n == 0 {
			return op
		}
	}
	return nil
}
