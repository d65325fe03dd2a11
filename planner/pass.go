package planner

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Pass is one named step of planning. Run works on s (the graph before
// placement, the plan after) and returns one line for people on what it
// did ("12 waits, 3 elided"); a pass changes only what its Scope allows.
type Pass interface {
	Name() string
	Scope() Scope
	Run(s *State) (summary string, err error)
}

// State is what the passes of one New work on.
type State struct {
	// Graph is the graph being planned: the one given to New, or what
	// the rewrite passes made of it.
	Graph *dag.Graph
	// Options are New's, with defaults filled in; the bodies pass prices
	// control ops in Options.Cost.
	Options Options
	// Plan is the plan kept so far: nil until the events pass has run.
	Plan *Plan
	// Parts says which ops of the graph given to New each op of Graph
	// runs, by ID, in order (Plan.Parts): nil while Graph's ops are the
	// graph's as given. A rewrite pass that merges, drops or renumbers
	// ops keeps it up to date, so that the verifier can check the plan
	// against the graph as declared.
	Parts [][]int32

	declared *dag.Graph // the graph given to New; nil for a body's
	made     *dag.Graph // the graph the fuse pass made, whose ops it alone holds
	bodies   map[int][]*Plan
	search   search
	// The candidate under way: its ordering, and the assigner that
	// places it.
	cand  candidate
	costs *costs // the graph's, which its candidates share
	a     *assigner
	next  placer
	spare *assigner // the previous candidate's, for newAssigner
	// starts holds each candidate plan's op starts in the schedule its
	// makespan was estimated from, for the gather pass.
	starts map[*Plan][]int64
}

// passes lists the passes New runs under o: fuse and split (unless o.Fuse
// and o.Split say none) and the rewrites, then the planner's own (gather
// and early unless o.Gather and o.Early say none), verify last when
// o.Verify asks for it. A
// body's plan has no gather: its waits join its streams (forkJoin).
func (o Options) passes() []Pass {
	ps := make([]Pass, 0, len(o.Rewrites)+8)
	if o.Fuse == FuseAuto {
		ps = append(ps, fusePass{})
	}
	if o.Split == SplitAuto {
		ps = append(ps, splitPass{})
	}
	ps = append(ps, o.Rewrites...)
	ps = append(ps, bodiesPass{}, orderPass{}, placePass{}, eventsPass{})
	if o.Gather == GatherAuto {
		ps = append(ps, gatherPass{})
	}
	ps = append(ps, memoryPass{})
	if o.Early == EarlyAuto {
		ps = append(ps, earlyPass{})
	}
	if o.Verify {
		ps = append(ps, verifyPass{})
	}
	return ps
}

// bodyPasses lists the passes that plan a body of a loop or branch: New's
// without fuse, memory, early and verify (a body's plan must run the body's own
// ops; the parent's plan holds the body's memory and its verification; a
// body's kernels launch plainly, inside a conditional node),
// with the fork and join of the body's streams.
func (o Options) bodyPasses() []Pass {
	ps := make([]Pass, 0, len(o.Rewrites)+5)
	ps = append(ps, o.Rewrites...)
	return append(ps, bodiesPass{}, orderPass{}, placePass{}, eventsPass{}, forkJoinPass{})
}

// ScopeError says that a pass broke its scope, or stands where its scope
// may not.
type ScopeError struct {
	Pass  string
	Scope Scope
	Msg   string
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("planner: pass %s (scope %s) %s", e.Pass, e.Scope, e.Msg)
}

// runPasses runs ps over s: each pass once, except the candidate passes
// (scopes order, place and events), which s.search runs once per
// candidate plan. It returns the record of every pass.
func runPasses(s *State, ps []Pass) ([]PassRecord, error) {
	log := make([]PassRecord, len(ps))
	for i, p := range ps {
		log[i] = PassRecord{Name: p.Name(), Scope: p.Scope()}
	}
	for i := 0; i < len(ps); i++ {
		p := ps[i]
		if p.Scope() == ScopeOrder { // order, place, events: planned per candidate
			j := i
			for j < len(ps) && ps[j].Scope() >= ScopeOrder && ps[j].Scope() < ScopeEvents {
				j++
			}
			if j == len(ps) || ps[j].Scope() != ScopeEvents {
				return log, &ScopeError{Pass: p.Name(), Scope: p.Scope(), Msg: "begins a run of candidate passes that no events pass ends"}
			}
			j++ // the events pass ends the run
			s.search = search{passes: ps[i:j], log: log[i:j]}
			if err := s.planGraph(s.Graph); err != nil {
				return log, err
			}
			i = j - 1
			continue
		}
		if err := runPass(s, p, &log[i]); err != nil {
			return log, err
		}
	}
	return log, nil
}

// runPass runs one pass over s and records it in rec.
func runPass(s *State, p Pass, rec *PassRecord) error {
	g := s.Graph
	t0 := time.Now()
	summary, err := p.Run(s)
	rec.Took += time.Since(t0)
	rec.Runs++
	rec.Summary = summary
	if err != nil {
		return fmt.Errorf("planner: pass %s: %w", p.Name(), err)
	}
	if s.Graph != g && p.Scope() != ScopeRewrite {
		return &ScopeError{Pass: p.Name(), Scope: p.Scope(), Msg: "changed the graph: only rewrite passes may"}
	}
	if s.Graph == nil {
		return &ScopeError{Pass: p.Name(), Scope: p.Scope(), Msg: "left no graph"}
	}
	if s.Graph != g {
		if err := checkOps(s.Graph); err != nil {
			return fmt.Errorf("planner: pass %s made a graph that cannot be placed: %w", p.Name(), err)
		}
	}
	return nil
}

// checkRewrites refuses rewrites of another scope.
func checkRewrites(rs []Pass) error {
	var errs []error
	for _, r := range rs {
		if r == nil {
			errs = append(errs, errors.New("planner: Rewrite was given a nil pass"))
		} else if r.Scope() != ScopeRewrite {
			errs = append(errs, &ScopeError{Pass: r.Name(), Scope: r.Scope(), Msg: "is given to Rewrite, which takes rewrite passes only"})
		}
	}
	return errors.Join(errs...)
}
