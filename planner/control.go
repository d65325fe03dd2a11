package planner

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/plan"
)

// planBodies plans the bodies of g's loops and branches (dag.While,
// dag.If), deepest first, each as a plan of its own under opts, and
// returns them by control op ID (Plan.Bodies) with opts whose cost model
// prices every control op as one pass of its body: the graph around a
// loop is placed knowing how long the loop's body takes. Both are nil
// and opts unchanged when g has no control ops.
func planBodies(g *dag.Graph, opts Options) (map[int][]*Plan, Options, error) {
	var bodies map[int][]*Plan
	var passes map[*dag.ControlSpec]time.Duration
	var errs []error
	for _, op := range g.Ops {
		if op == nil || op.Control == nil {
			continue
		}
		var plans []*Plan
		var pass time.Duration
		for i, body := range op.Bodies() {
			p, err := newBody(body, opts)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s, %s: %w", op.Kind, op.Name, plan.BodyName(op, i), err))
				continue
			}
			renameStreams(p, bodyPrefix(op, i))
			plans = append(plans, p)
			pass = max(pass, p.Stats.Makespan)
		}
		if bodies == nil {
			bodies, passes = map[int][]*Plan{}, map[*dag.ControlSpec]time.Duration{}
		}
		bodies[op.ID] = plans
		passes[op.Control] = pass
	}
	if len(errs) > 0 {
		return nil, opts, errors.Join(errs...)
	}
	if bodies != nil {
		opts.Cost = controlCost{CostModel: opts.Cost, passes: passes}
	}
	return bodies, opts, nil
}

// newBody plans one body under the parent's options and objective: its
// ops as New would place them (its own streams and events; its own loops
// and branches planned within it), then the fork from and the join into
// its entry stream (forkJoin). Bodies hold no allocs or frees, so a
// memory budget, which orders temporaries, has nothing to do in them:
// the parent's plan counts what they use.
func newBody(g *dag.Graph, opts Options) (*Plan, error) {
	if err := checkOps(g); err != nil {
		return nil, err
	}
	opts.MemoryBudget = nil
	// On CUDA a body is always a graph (a conditional node's, eager runs
	// included), so it is placed and priced as a replay is.
	opts.Mode = Replay
	s := &State{Graph: g, Options: opts}
	log, err := runPasses(s, opts.bodyPasses())
	if err != nil {
		return nil, err
	}
	s.Plan.Passes = log
	return s.Plan, nil
}

// bodyPrefix is what the names of body i's streams begin with, so that
// people tell them from the streams around them: "refine/" for a loop's
// body or a branch's then, "pick/else/" for an else.
func bodyPrefix(op *dag.Op, i int) string {
	if i == 1 {
		return op.Name + "/else/"
	}
	return op.Name + "/"
}

func renameStreams(p *Plan, prefix string) {
	for i := range p.Streams {
		p.Streams[i].Name = prefix + p.Streams[i].Name
	}
}

// controlCost is the cost model of a graph with control ops: a control op
// takes one pass of its body (the makespan of its body's plan; for a
// branch, the longer one), unless it sets its own Cost; every other op
// is its model's. A loop's iterations are unknown when planning: one pass
// is what the ops around it can be placed against.
type controlCost struct {
	perf.CostModel
	passes map[*dag.ControlSpec]time.Duration
}

func (c controlCost) Duration(op *dag.Op) time.Duration {
	if op.Control != nil && op.Cost <= 0 {
		if d, ok := c.passes[op.Control]; ok {
			return d
		}
	}
	return c.CostModel.Duration(op)
}

func (c controlCost) Overheads() perf.Overheads { return perf.OverheadsOf(c.CostModel) }

// passCost is controlPassCost, reached through a variable: the kind table
// names it, and it plans, which reads the kind table.
func passCost(op *dag.Op) time.Duration { return controlPass(op) }

var controlPass func(*dag.Op) time.Duration

func init() { controlPass = controlPassCost }

// controlPassCost is a control op's duration under DefaultCost when the
// op sets none: one pass of its body, the makespan of the body's plan
// under default Options (for a branch, the longer one). New does not ask
// it: it plans the bodies under the caller's options and costs the
// control op from those plans (controlCost).
func controlPassCost(op *dag.Op) time.Duration {
	var d time.Duration
	for _, body := range op.Bodies() {
		if p, err := New(body); err == nil {
			d = max(d, p.Stats.Makespan)
		}
	}
	return d
}

// checkControl appends to errs what makes control op op impossible to
// plan: a While or If needs the bodies Build gives it.
func checkControl(errs []error, op *dag.Op) []error {
	if op.Control == nil || op.Control.Body == nil {
		return append(errs, &dag.Error{Op: op.Name, Msg: fmt.Sprintf("%s has no body", op.Kind),
			Hint: "declare it with dag.Builder.While or If, and build the graph"})
	}
	if op.Kind.Info().Body == dag.Loop && len(op.Control.Body.Ops) == 0 {
		return append(errs, &dag.Error{Op: op.Name, Msg: "the loop's body is empty: nothing could clear its flag",
			Hint: "give the loop a body that updates its flag"})
	}
	for _, body := range op.Bodies() {
		for _, o := range body.Ops {
			if o != nil && o.Device != op.Device {
				return append(errs, &dag.Error{Op: o.Name, Msg: fmt.Sprintf("it runs on device %d and the %s %s on device %d: a body runs on one device", o.Device, op.Kind, op.Name, op.Device),
					Hint: "build graphs with dag.Builder, which refuses it"})
			}
		}
	}
	return errs
}

// forkJoin makes the body plan p start and end on its entry stream,
// Streams[0], and returns the waits it adds. First, a record of an entry
// event on the entry stream, and a wait on it by every other stream not
// already ordered after the entry when it runs its first op (through a
// wait on an event recorded on a stream that is); then, at the end, a
// record on every other stream whose last op the entry stream is not yet
// ordered after, and the entry stream's wait on it. The fork and join
// steps name op -1. Events of the fork and join come after p's own.
func forkJoin(p *Plan) int {
	if len(p.Streams) == 0 {
		return 0
	}
	entry := int32(p.Events)
	p.Events++
	ns := len(p.Streams)

	// The fork: which streams need the entry event.
	forked := make([]bool, ns)
	forked[0] = true
	eventForked := make([]bool, p.Events)
	needFork := make([]bool, ns)
	for _, st := range p.Steps {
		switch st.Kind {
		case Record:
			eventForked[st.Event] = forked[st.Stream]
		case Wait:
			forked[st.Stream] = forked[st.Stream] || eventForked[st.Event]
		case Run:
			if !forked[st.Stream] {
				forked[st.Stream], needFork[st.Stream] = true, true
			}
		}
	}
	head := []Step{{Kind: Record, Stream: 0, Op: -1, Event: entry}}
	waits := 0
	for s := 1; s < ns; s++ {
		if needFork[s] {
			head = append(head, Step{Kind: Wait, Stream: int32(s), Op: -1, Event: entry})
			waits++
		}
	}
	p.Steps = append(head, p.Steps...)

	// The join: each stream's clock at its end, in runs of every stream.
	clock := make([][]int32, ns)
	for s := range clock {
		clock[s] = make([]int32, ns)
	}
	events := make([][]int32, p.Events)
	for _, st := range p.Steps {
		c := clock[st.Stream]
		switch st.Kind {
		case Record:
			events[st.Event] = append(events[st.Event][:0], c...)
		case Wait:
			for t, x := range events[st.Event] {
				c[t] = max(c[t], x)
			}
		case Run:
			c[st.Stream]++
		}
	}
	covered := func(t int) bool { return clock[0][t] >= clock[t][t] }
	for {
		// Join a stream that no other unjoined stream's end covers: its
		// end may cover others, which then need no join of their own.
		pick := -1
		for t := 1; t < ns && pick < 0; t++ {
			if covered(t) {
				continue
			}
			pick = t
			for u := 1; u < ns; u++ {
				if u != t && !covered(u) && clock[u][t] >= clock[t][t] && clock[u][u] > clock[t][u] {
					pick = -1 // u's end covers t's and more: join u instead
					break
				}
			}
		}
		if pick < 0 {
			for t := 1; t < ns; t++ {
				if !covered(t) { // streams whose ends cover each other: any will do
					pick = t
					break
				}
			}
		}
		if pick < 0 {
			break
		}
		e := int32(p.Events)
		p.Events++
		p.Steps = append(p.Steps,
			Step{Kind: Record, Stream: int32(pick), Op: -1, Event: e},
			Step{Kind: Wait, Stream: 0, Op: -1, Event: e})
		waits++
		for t, x := range clock[pick] {
			clock[0][t] = max(clock[0][t], x)
		}
	}
	return waits
}
