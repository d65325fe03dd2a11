package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

// faults are the fault-injection flags of dagrun run: --chaos SEED (random
// delays before ops, the same for the same seed) and --fail-op NAME (the
// op fails when it would run).
type faults struct {
	chaos    uint64
	chaosSet bool
	failOp   string
}

func (f *faults) addFlags(fs *flag.FlagSet) {
	fs.Func("chaos", "", func(v string) error {
		seed, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return errors.New("give a seed, an unsigned 64-bit integer")
		}
		f.chaos, f.chaosSet = seed, true
		return nil
	})
	fs.Func("fail-op", "", func(v string) error {
		if v == "" {
			return errors.New("give the name of an op of the spec")
		}
		f.failOp = v
		return nil
	})
}

// check makes sure --fail-op names an op of s: a usage error otherwise,
// naming the ops.
func (f *faults) check(s *spec.Spec) error {
	if f.failOp == "" {
		return nil
	}
	names := make([]string, 0, len(s.Graph.Ops))
	for _, op := range s.Graph.Ops {
		if op.Name == f.failOp {
			return nil
		}
		names = append(names, op.Name)
	}
	return usagef("--fail-op %q: %s has no such op (%s)", f.failOp, s.File, suggestName(f.failOp, names))
}

// checkGraph refuses faults for a run replayed as a graph: they are
// injected into eager runs only (a captured graph holds no pauses or
// failures). flag tells whether --graph asked for the graph, else the spec.
func (f *faults) checkGraph(graph, flag bool, s *spec.Spec) error {
	if !graph || (!f.chaosSet && f.failOp == "") {
		return nil
	}
	if flag {
		return usagef("--chaos and --fail-op act on eager runs, not on graph replays; drop --graph")
	}
	return usagef("--chaos and --fail-op act on eager runs, and %s sets run.graph: true; add --graph=false", s.File)
}

// options are the executor options for the faults asked for.
func (f *faults) options() ([]executor.Option, error) {
	var opts []executor.Option
	if f.chaosSet {
		opts = append(opts, executor.WithChaos(f.chaos))
	}
	if f.failOp != "" {
		opts = append(opts, executor.WithFailOp(f.failOp))
	}
	return opts, nil
}

// memoryFailure is a run refused by admission control, placed where the
// spec tells of its largest buffer: a temporary at its alloc op (which the
// spec places at the buffer), a persistent buffer at its output entry or
// else at the first op that uses it.
func memoryFailure(s *spec.Spec, me *executor.MemoryError) *failure {
	p := problem{File: s.File, Message: me.Error()}
	if pos, ok := bufferPos(s, me.Buffers); ok {
		p = p.at(pos)
	}
	return &failure{status: exitFailure, errors: []problem{p}}
}

func bufferPos(s *spec.Spec, bufs []*dag.Buffer) (spec.Position, bool) {
	if len(bufs) == 0 {
		return spec.Position{}, false
	}
	b := bufs[0]
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
	return spec.Position{}, false
}

// Suggestions compare names of at most maxSuggestLen bytes, and of
// lengths within a third of each other, so that the work stays small
// whatever the input.
const maxSuggestLen = 128

// suggestName is "did you mean "X"?" for the candidate nearest got, or
// the candidates (at most 12) when none is near.
func suggestName(got string, candidates []string) string {
	best, bestDist := "", -1
	if len(got) <= maxSuggestLen {
		for _, c := range candidates {
			if len(c) > maxSuggestLen || abs(len(c)-len(got)) > max(1, len(c)/3) {
				continue
			}
			d := editDistance(strings.ToLower(got), strings.ToLower(c))
			if d <= max(1, len(c)/3) && d < len(c) && (bestDist < 0 || d < bestDist) {
				best, bestDist = c, d
			}
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	if len(candidates) > 12 {
		return "its ops include " + strings.Join(candidates[:12], ", ") + ", ..."
	}
	return "its ops are " + strings.Join(candidates, ", ")
}

func abs(n int) int { return max(n, -n) }

// editDistance is the Levenshtein distance between a and b in bytes, in
// two rows of memory.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
