package trace

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Planned against achieved: a run's spans compared with the plan's own
// simulation of it, so that lost overlap and late ops show as lists.

// Comparison is one run against its plan.
type Comparison struct {
	Mode              planner.Mode  `json:"-"`
	ModeName          string        `json:"mode"`
	EstimatedMakespan time.Duration `json:"estimated_makespan_ns"` // the simulation's
	MeasuredMakespan  time.Duration `json:"measured_makespan_ns"`  // the run's: its last op's end
	// Planned counts the pairs of ops on different streams that the plan
	// meant to run at once, and Lost those that did not overlap at all.
	Planned int `json:"pairs_planned"`
	Lost    int `json:"pairs_lost"`
	// Pairs are some of them: lost ones first, then by planned overlap
	// (at most maxPairs).
	Pairs []OverlapPair `json:"pairs"`
	// Late are the ops that started later than planned by more than the
	// ops they depend on explain, latest first (at most maxLate).
	Late []LateOp `json:"late"`
	// Loops are the top-level loops that ran: one pass of each body as
	// planned against the measured time per iteration.
	Loops []LoopPass `json:"loops,omitempty"`
}

// LoopPass is a top-level loop of a run against its plan: the planner
// prices a loop as one pass of its body (its iterations are unknown when
// planning), so the pass is set against the loop's measured time divided
// by the iterations it ran.
type LoopPass struct {
	Loop       string        `json:"loop"`
	Iterations int           `json:"iterations"`
	Pass       time.Duration `json:"estimated_pass_ns"` // the simulation's one pass
	Measured   time.Duration `json:"measured_ns"`       // from the body's first span to its last
	PerPass    time.Duration `json:"measured_per_iteration_ns"`
}

// OverlapPair is two ops the plan overlapped, and how much they did.
type OverlapPair struct {
	A        string        `json:"a"`
	B        string        `json:"b"`
	Planned  time.Duration `json:"planned_ns"`
	Achieved time.Duration `json:"achieved_ns"` // zero: they ran one after the other
}

// LateOp is an op that started after its planned start, and why: Cause
// is "wait" (an op on another stream it depends on ended late: Detail names
// it), "stream" (the op before it on its stream ran late or long: Detail
// names it) or "host" (nothing on the device held it: it was submitted
// late).
type LateOp struct {
	Op      string        `json:"op"`
	Planned time.Duration `json:"planned_start_ns"` // from the run's start
	Actual  time.Duration `json:"start_ns"`
	Delay   time.Duration `json:"delay_ns"` // Actual - Planned, less the delay it inherited
	Cause   string        `json:"cause"`
	Detail  string        `json:"waited_for,omitempty"`
}

const (
	maxPairs = 20
	maxLate  = 20
	// slack is how far apart two times may be and still count as one: an
	// op that starts within slack of a dependency's end waited for it.
	slack = 2 * time.Microsecond
)

// ComparePlan compares one run's spans with plan p's simulation under cost
// for mode. Ops without a span (work the tracer did not see) are left out.
//
// A loop or branch is compared as one op of the graph it is in, its
// measured time running from its bodies' first span to their last (unless
// the backend timed the op itself): ops after it that waited for it are
// then not counted late. The ops inside bodies are not paired or checked
// for lateness one by one: the plan places them in one pass of their body,
// while a loop runs that pass as many times as its flag says, so their
// planned times say nothing about any iteration but the first. Each
// top-level loop is instead compared as a whole in Loops: one pass as
// planned against its measured time per iteration.
func ComparePlan(p *planner.Plan, cost perf.CostModel, mode planner.Mode, spans []executor.Span) Comparison {
	sim := perf.Simulate(p, cost, mode)
	c := Comparison{Mode: mode, ModeName: mode.String(), EstimatedMakespan: sim.Makespan, Pairs: []OverlapPair{}, Late: []LateOp{}}
	n := len(p.Graph.Ops)
	have := make([]bool, n)
	got := make([]executor.Span, n)
	for _, sp := range spans {
		if sp.Op >= 0 && sp.Op < n && sp.Op < len(sim.Start) {
			have[sp.Op], got[sp.Op] = true, sp
			c.MeasuredMakespan = max(c.MeasuredMakespan, sp.End)
		}
	}
	c.Loops = compareBodies(p, sim, spans, have, got, &c.MeasuredMakespan)
	name := func(op int) string { return p.Graph.Ops[op].Name }

	// Overlap pairs: a sweep over the planned intervals, by start.
	ids := make([]int, 0, n)
	for id := range n {
		if have[id] && id < len(sim.Duration) && sim.Duration[id] > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int) int { return cmp.Compare(sim.Start[a], sim.Start[b]) })
	overlap := func(s1, e1, s2, e2 time.Duration) time.Duration { return max(0, min(e1, e2)-max(s1, s2)) }
	var pairs []OverlapPair
	for i, a := range ids {
		endA := sim.Start[a] + sim.Duration[a]
		for _, b := range ids[i+1:] {
			if sim.Start[b] >= endA {
				break
			}
			if p.OpStream[a] == p.OpStream[b] {
				continue
			}
			planned := overlap(sim.Start[a], endA, sim.Start[b], sim.Start[b]+sim.Duration[b])
			if planned <= 0 {
				continue
			}
			pairs = append(pairs, OverlapPair{A: name(a), B: name(b), Planned: planned,
				Achieved: overlap(got[a].Start, got[a].End, got[b].Start, got[b].End)})
			if len(pairs) > 64*maxPairs { // enough to choose from; the sweep stays linear in practice
				break
			}
		}
	}
	c.Planned = len(pairs)
	for _, pr := range pairs {
		if pr.Achieved == 0 {
			c.Lost++
		}
	}
	slices.SortStableFunc(pairs, func(x, y OverlapPair) int {
		// Lost overlap first, then by planned overlap.
		if (x.Achieved == 0) != (y.Achieved == 0) {
			if x.Achieved == 0 {
				return -1
			}
			return 1
		}
		return cmp.Compare(y.Planned, x.Planned)
	})
	c.Pairs = pairs[:min(len(pairs), maxPairs)]

	// Late ops: each op's delay against the plan, less what its
	// dependencies and its stream's previous op handed down.
	order := make([]int, 0, n)
	for id := range n {
		if have[id] {
			order = append(order, id)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(got[a].Start, got[b].Start) })
	prevOnStream := map[int32]int{}
	delay := make([]time.Duration, n) // each op's end delay against the plan
	for _, id := range order {
		planned := sim.Start[id]
		late := got[id].Start - planned
		delay[id] = got[id].End - (planned + sim.Duration[id])
		// What held the op last: the latest end among its dependencies and
		// the op before it on its stream.
		cause, detail := "host", ""
		var heldUntil time.Duration
		var inherited time.Duration
		for _, d := range p.Graph.Ops[id].Deps {
			if int(d) < n && have[d] && got[d].End > heldUntil {
				heldUntil, inherited = got[d].End, delay[d]
				cause, detail = "wait", name(int(d))
				if p.OpStream[d] == p.OpStream[id] {
					cause = "stream"
				}
			}
		}
		if prev, ok := prevOnStream[p.OpStream[id]]; ok && got[prev].End > heldUntil {
			heldUntil, inherited = got[prev].End, delay[prev]
			cause, detail = "stream", name(prev)
		}
		prevOnStream[p.OpStream[id]] = id
		if got[id].Start-heldUntil > slack {
			// Nothing on the device held it: the host had not submitted it.
			cause, detail, inherited = "host", "", 0
		}
		own := late - max(inherited, 0)
		if own <= slack || own*20 <= c.EstimatedMakespan {
			continue
		}
		c.Late = append(c.Late, LateOp{Op: name(id), Planned: planned, Actual: got[id].Start, Delay: own,
			Cause: cause, Detail: detail})
	}
	slices.SortStableFunc(c.Late, func(x, y LateOp) int { return cmp.Compare(y.Delay, x.Delay) })
	c.Late = c.Late[:min(len(c.Late), maxLate)]
	return c
}

// compareBodies gives each top-level loop or branch that has no span of
// its own the extent of its bodies' spans in have and got, and returns
// the loops' passes against their iterations; makespan grows to the
// bodies' last span.
func compareBodies(p *planner.Plan, sim perf.Schedule, spans []executor.Span, have []bool, got []executor.Span, makespan *time.Duration) []LoopPass {
	n := len(p.Graph.Ops)
	total := n + len(p.Graph.Nested)
	if total == n {
		return nil
	}
	holder := make([]int32, total) // by Index: the top-level op running a body op
	direct := make([]bool, total)  // by Index: the op is directly in a top-level loop's body
	for _, o := range p.Graph.Ops {
		for _, body := range o.Bodies() {
			for _, in := range body.Ops {
				if in.Index >= n && in.Index < total {
					direct[in.Index] = o.Kind.Info().Body == dag.Loop
				}
			}
			body.Walk(func(in *dag.Op) {
				if in.Index >= n && in.Index < total {
					holder[in.Index] = int32(o.ID)
				}
			})
		}
	}
	timed := slices.Clone(have) // ops the backend timed themselves
	count := make([]int, total)
	iterations := make([]int, n)
	for _, sp := range spans {
		if sp.Op < n || sp.Op >= total {
			continue
		}
		h := holder[sp.Op]
		*makespan = max(*makespan, sp.End)
		count[sp.Op]++
		if direct[sp.Op] {
			iterations[h] = max(iterations[h], count[sp.Op])
		}
		if timed[h] {
			continue
		}
		if !have[h] {
			have[h], got[h] = true, executor.Span{Op: int(h), Start: sp.Start, End: sp.End}
			continue
		}
		got[h].Start, got[h].End = min(got[h].Start, sp.Start), max(got[h].End, sp.End)
	}
	var loops []LoopPass
	for id, k := range iterations {
		if k == 0 || id >= len(sim.Duration) {
			continue
		}
		// The loop's own span where the backend timed it, else its body's.
		l := LoopPass{Loop: p.Graph.Ops[id].Name, Iterations: k, Pass: sim.Duration[id], Measured: got[id].End - got[id].Start}
		l.PerPass = l.Measured / time.Duration(k)
		loops = append(loops, l)
	}
	return loops
}

// Brief says the comparison in a line: the makespans, the overlaps lost
// and the late ops counted.
func (c Comparison) Brief() string {
	return fmt.Sprintf("planned against achieved (%s): makespan estimated %s, measured %s; %d of %d planned overlaps lost, %s late",
		c.ModeName, fmtDur(c.EstimatedMakespan), fmtDur(c.MeasuredMakespan), c.Lost, c.Planned, human.Count(len(c.Late), "op", "ops"))
}

// Write prints the comparison as text: the makespans, the pairs whose
// planned overlap was lost or shrank, and the late ops with their causes.
func (c Comparison) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "planned against achieved (%s): makespan estimated %s, measured %s\n",
		c.Mode, fmtDur(c.EstimatedMakespan), fmtDur(c.MeasuredMakespan))
	fmt.Fprintf(bw, "  overlap: %s of ops planned to overlap, %d did not overlap at all (%d shown)\n",
		human.Count(c.Planned, "pair", "pairs"), c.Lost, len(c.Pairs))
	for _, pr := range c.Pairs {
		state := "overlapped"
		if pr.Achieved == 0 {
			state = "did NOT overlap"
		}
		fmt.Fprintf(bw, "    %s | %s: planned %s, achieved %s (%s)\n", pr.A, pr.B, fmtDur(pr.Planned), fmtDur(pr.Achieved), state)
	}
	if len(c.Late) == 0 {
		fmt.Fprintln(bw, "  late ops: none beyond what their dependencies explain")
	} else {
		fmt.Fprintln(bw, "  late ops (delay of their own, latest first):")
	}
	for _, l := range c.Late {
		why := "the host (submitted late)"
		switch l.Cause {
		case "wait":
			why = "a wait for " + l.Detail
		case "stream":
			why = "its stream, busy with " + l.Detail
		}
		fmt.Fprintf(bw, "    %s: planned at %s, started at %s (+%s), held by %s\n", l.Op, fmtDur(l.Planned), fmtDur(l.Actual), fmtDur(l.Delay), why)
	}
	for _, l := range c.Loops {
		fmt.Fprintf(bw, "  loop %s: one pass estimated %s, measured %s per iteration (%d iterations, %s in all)\n",
			l.Loop, fmtDur(l.Pass), fmtDur(l.PerPass), l.Iterations, fmtDur(l.Measured))
	}
	return bw.Flush()
}
