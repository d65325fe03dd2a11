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
	names := make([]string, 0, len(s.Graph.Ops)+len(s.Graph.Nested))
	found := false
	s.Graph.Walk(func(op *dag.Op) { // the ops of loops' and branches' bodies too
		found = found || op.Name == f.failOp
		names = append(names, op.Name)
	})
	if found {
		return nil
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
func (f *faults) options() []executor.Option {
	var opts []executor.Option
	if f.chaosSet {
		opts = append(opts, executor.WithChaos(f.chaos))
	}
	if f.failOp != "" {
		opts = append(opts, executor.WithFailOp(f.failOp))
	}
	return opts
}

// suggestName is "did you mean "X"?" for the candidate nearest got (as
// the spec loader suggests), or the candidates (at most 12) when none is
// near.
func suggestName(got string, candidates []string) string {
	if best, ok := spec.Nearest(got, candidates); ok {
		return fmt.Sprintf("did you mean %q?", best)
	}
	if len(candidates) > 12 {
		return "its ops include " + strings.Join(candidates[:12], ", ") + ", ..."
	}
	return "its ops are " + strings.Join(candidates, ", ")
}
