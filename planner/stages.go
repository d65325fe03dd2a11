package planner

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner/memory"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
)

// The planner's own passes. Order, place and events run once per
// candidate plan: list scheduling chooses the next op by where the ops
// before it went, so order builds the ordering and place drives it.

// candidate is one plan to make: an ordering and a stream budget.
type candidate struct {
	by      ordering
	streams int
	ordered func(dag.OpKind) bool // which kinds keep declaration order; nil: the kind table's (tests override it)
}

func (c candidate) String() string {
	return c.by.String() + " with " + strconv.Itoa(c.streams) + " " + plural(c.streams, "stream", "streams")
}

// search is the run of candidate passes of one New and what it tried.
type search struct {
	passes []Pass       // order .. events
	log    []PassRecord // theirs
	tried  int          // candidates planned, over every plan of the search
	kept   candidate    // the last choice's
	plans  [][]*Plan    // the candidates of the plan under way, per stream budget
	cands  []candidate  // the orderings of all of them, in order
}

// planGraph plans g, whose checked ops s.Graph shares, by running the
// candidate passes once per candidate that Options.Strategy and the
// Objective call for, and keeps the objective's choice in s.Plan.
func (s *State) planGraph(g *dag.Graph) error {
	o := s.Options
	sr := &s.search
	sr.plans, sr.cands = sr.plans[:0], sr.cands[:0]
	try := func(c candidate) error {
		s.cand = c
		s.Plan = nil
		for k, p := range sr.passes {
			if err := runPass(s, p, &sr.log[k]); err != nil {
				return err
			}
		}
		if s.Plan == nil {
			return &ScopeError{Pass: sr.passes[len(sr.passes)-1].Name(), Scope: ScopeEvents, Msg: "made no plan"}
		}
		s.Plan.Graph = g
		last := len(sr.plans) - 1
		sr.plans[last] = append(sr.plans[last], s.Plan)
		sr.cands = append(sr.cands, c)
		sr.tried++
		return nil
	}
	graph := s.Graph
	s.Graph, s.costs = g, nil // the candidates of g share its costs
	defer func() {
		s.Graph, s.spare = graph, nil
		if g != graph {
			s.costs = nil // kept for the passes after only when they are the graph's (gather)
		}
	}()
	for _, n := range o.Objective.streamBudgets(o.Streams, o.Mode, len(g.Ops)) {
		sr.plans = append(sr.plans, nil)
		var more []ordering
		switch o.Strategy {
		case DeclarationOrder:
			if err := try(candidate{by: byDeclaration, streams: n}); err != nil {
				return err
			}
			continue
		case Best:
			more = []ordering{byEarliestStart, byLookahead, byDeclaration}
		default:
			if err := try(candidate{by: byEarliestStart, streams: n}); err != nil {
				return err
			}
			first := s.Plan
			if len(g.Ops) > maxTriedOps || o.Objective.enough(first, func() int64 { return lowerBound(g, o, first) }) {
				continue
			}
			more = []ordering{byLookahead, byDeclaration}
		}
		for _, by := range more {
			if err := try(candidate{by: by, streams: n}); err != nil {
				return err
			}
		}
	}
	s.Plan = o.Objective.choose(o.Mode, o.PoolTemporaries, sr.plans)
	i := 0
	for _, group := range sr.plans {
		for _, p := range group {
			if p == s.Plan {
				sr.kept = sr.cands[i]
			}
			i++
		}
	}
	for k, p := range sr.passes {
		if sm, ok := p.(summarizer); ok {
			sr.log[k].Summary = sm.summary(s)
		}
	}
	return nil
}

// summarizer is a candidate pass that says what it did for the plan
// kept, not the last candidate.
type summarizer interface{ summary(s *State) string }

// orderPass decides the order in which ops are placed: by the candidate's
// ordering, list scheduling's by when each op can start, its path to the
// end of the graph (bottom levels) and the objective's tie rules.
type orderPass struct{}

func (orderPass) Name() string { return "order" }
func (orderPass) Scope() Scope { return ScopeOrder }

func (orderPass) Run(s *State) (string, error) {
	o := s.Options
	o.Streams = s.cand.streams
	if s.costs == nil {
		s.costs = costsOf(s.Graph, o)
	}
	s.a = newAssigner(s.Graph, o, s.costs, s.spare)
	s.next = s.cand.by.placer(s.a, s.cand.ordered)
	return "", nil
}

func (orderPass) summary(s *State) string {
	sr := &s.search
	// Joined rather than formatted: a summary is made at every New.
	return s.Options.Strategy.String() + " placement: " + strconv.Itoa(sr.tried) + " " + plural(sr.tried, "candidate", "candidates") +
		" planned, kept " + sr.kept.String() + " (objective " + s.Options.Objective.String() + ")"
}

// placePass puts each op, in the order orderPass gives, on the stream of
// its pool where it can start earliest, and decides the waits it needs.
type placePass struct{}

func (placePass) Name() string { return "place" }
func (placePass) Scope() Scope { return ScopePlace }

func (placePass) Run(s *State) (string, error) {
	place(s.Graph, s.Options, s.a, s.next)
	return "", nil
}

func (placePass) summary(s *State) string {
	st := s.Plan.Stats
	return strconv.Itoa(st.Ops) + " ops on " + strconv.Itoa(st.Streams) + " " + plural(st.Streams, "stream", "streams") + ", " +
		strconv.Itoa(st.CrossEdges) + " cross-stream " + plural(st.CrossEdges, "edge", "edges")
}

// eventsPass numbers the events, lays out the one submission order of
// runs, records and waits, and estimates the plan's makespan.
type eventsPass struct{}

func (eventsPass) Name() string { return "events" }
func (eventsPass) Scope() Scope { return ScopeEvents }

func (eventsPass) Run(s *State) (string, error) {
	o := s.Options
	p := &Plan{Graph: s.Graph, Streams: s.a.streams, OpStream: s.a.opStream, Topology: o.Topology, SMs: o.SMs}
	s.a.layOut(p)
	var start []int64 // the ops' starts, for the gather pass of a graph's plan (a body's has none)
	if o.Gather == GatherAuto && s.declared != nil {
		start = make([]int64, len(s.Graph.Ops))
		if s.starts == nil {
			s.starts = map[*Plan][]int64{}
		}
		s.starts[p] = start
	}
	makespan, _ := perf.SimulateWith(p, s.a.dur, s.a.fill, perf.OverheadsOf(o.Cost), o.Mode, start)
	p.Stats = Stats{
		Ops:          len(s.Graph.Ops),
		Streams:      len(s.a.streams),
		CrossEdges:   s.a.crossEdges,
		Waits:        s.a.waitOps.len(),
		Makespan:     time.Duration(makespan),
		CriticalPath: time.Duration(s.a.critical),
		Mode:         o.Mode,
		Strategy:     s.cand.by.strategy(),
	}
	p.Bodies = s.bodies
	if s.Parts != nil {
		p.Declared, p.Parts = s.declared, s.Parts
	}
	s.Plan = p
	s.a, s.next, s.spare = nil, nil, s.a
	return "", nil
}

func (eventsPass) summary(s *State) string {
	st := s.Plan.Stats
	return strconv.Itoa(st.Waits) + " " + plural(st.Waits, "wait", "waits") + ", " + strconv.Itoa(st.CrossEdges-st.Waits) + " elided, " +
		strconv.Itoa(s.Plan.Events) + " " + plural(s.Plan.Events, "event", "events") + "; estimated makespan " +
		human.Duration(st.Makespan) + ", critical path " + human.Duration(st.CriticalPath)
}

// bodiesPass plans the bodies of loops and branches (control.go) and
// prices each control op as one pass of its body.
type bodiesPass struct{}

func (bodiesPass) Name() string { return "bodies" }
func (bodiesPass) Scope() Scope { return ScopePlace }

func (bodiesPass) Run(s *State) (string, error) {
	bodies, opts, err := planBodies(s.Graph, s.Options)
	if err != nil {
		return "", err
	}
	s.bodies, s.Options = bodies, opts
	n := 0
	for _, b := range bodies {
		n += len(b)
	}
	if n == 0 {
		return "no loops or branches", nil
	}
	return fmt.Sprintf("%d %s of %d %s planned", n, plural(n, "body", "bodies"), len(bodies), plural(len(bodies), "loop or branch", "loops and branches")), nil
}

// forkJoinPass makes a body's plan start and end on its entry stream
// (forkJoin) and estimates it again.
type forkJoinPass struct{}

func (forkJoinPass) Name() string { return "fork-join" }
func (forkJoinPass) Scope() Scope { return ScopeEvents }

func (forkJoinPass) Run(s *State) (string, error) {
	p := s.Plan
	waits := forkJoin(p)
	p.Stats.Waits += waits
	// The fork and join cost their records and waits: estimate again.
	p.Stats.Makespan = perf.Simulate(p, s.Options.Cost, s.Options.Mode).Makespan
	return fmt.Sprintf("%d %s to fork and join the body's streams", waits, plural(waits, "wait", "waits")), nil
}

// memoryPass lays out the temporaries (MemoryOf) and meets
// Options.MemoryBudget (withBudget).
type memoryPass struct{}

func (memoryPass) Name() string { return "memory" }
func (memoryPass) Scope() Scope { return ScopeMemory }

func (memoryPass) Run(s *State) (string, error) {
	if s.Plan.Memory == nil {
		s.Plan.Memory = memory.Of(s.Plan)
	}
	if len(s.Options.MemoryBudget) > 0 {
		p, err := withBudget(s, s.Plan)
		if err != nil {
			return "", err
		}
		s.Plan = p
	}
	return memorySummary(s.Plan), nil
}

// memorySummary says what memoryPass found: the temporaries, their peak
// and arena per memory, and what a budget cost.
func memorySummary(p *Plan) string {
	m := p.Memory
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(m.Temporaries)) + " " + plural(len(m.Temporaries), "temporary", "temporaries"))
	for _, u := range m.Memories {
		if u.Temporaries > 0 {
			fmt.Fprintf(&b, "; %s: peak %s, arena %s", plan.MemoryName(u.Device), dag.FormatBytes(u.TemporaryPeak), dag.FormatBytes(u.ArenaBytes))
		}
	}
	if p.Budget != nil {
		fmt.Fprintf(&b, "; budget met by ordering %d %s", p.Budget.Orderings, plural(p.Budget.Orderings, "pair", "pairs"))
	}
	return b.String()
}

// verifyPass checks the plan with Verify, independently of how it was
// made.
type verifyPass struct{}

func (verifyPass) Name() string { return "verify" }
func (verifyPass) Scope() Scope { return ScopeVerify }

func (verifyPass) Run(s *State) (string, error) {
	if err := verify.Verify(s.Plan); err != nil {
		return "", err
	}
	if s.Plan.Declared != nil {
		return "every conflicting pair ordered, of the graph as planned and as declared, every wait after its record, memory in bounds", nil
	}
	return "every conflicting pair ordered, every wait after its record, memory in bounds", nil
}
