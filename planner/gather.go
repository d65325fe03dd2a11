package planner

import (
	"slices"
	"strconv"

	"github.com/dagrun/dagrun/planner/perf"
)

// gatherPass moves waits up their stream to where the stream waits
// already. A kernel that follows its stream's previous op with no wait
// between them starts as soon as it ends, or sooner (cuBLASLt's GEMMs
// on an H200 followed one another by 0.3 us); one that waits for another
// stream's event started 2-6 us after both were done, however long ago
// the event was reached (a CUPTI trace of examples/mlp_stream.yaml). So
// the waits before an op move up to the op before which the stream last
// waited, where one more wait costs nothing, when the cost model's
// schedule has the event reached by then; the op then follows its
// predecessor directly. A wait only moves up its stream: it orders more,
// never less, and the pass moves none that would close a cycle.
type gatherPass struct{}

func (gatherPass) Name() string { return "gather" }
func (gatherPass) Scope() Scope { return ScopeEvents }

func (gatherPass) Run(s *State) (string, error) {
	p := s.Plan
	n := gatherWaits(p, s.Options.Cost)
	if n == 0 {
		return "no wait moved", nil
	}
	dropped := dropImplied(p)
	p.Stats.Waits -= dropped
	p.Stats.Makespan = perf.Simulate(p, s.Options.Cost, s.Options.Mode).Makespan
	return strconv.Itoa(n) + " " + plural(n, "wait", "waits") + " moved up to an earlier one, " + strconv.Itoa(dropped) + " then implied by others dropped", nil
}

// gatherWaits moves up the waits of p that it can (gatherPass) and
// returns how many it moved. All the waits before an op move, or none: a
// wait left there would keep the op from following its predecessor.
func gatherWaits(p *Plan, cost perf.CostModel) int {
	if p == nil || p.Graph == nil || len(p.Steps) == 0 || p.Events == 0 {
		return 0
	}
	h, ok := orderOf(p)
	if !ok {
		return 0
	}
	sched := perf.Simulate(p, cost, p.Stats.Mode)
	end := func(op int32) int64 { return int64(sched.Start[op] + sched.Duration[op]) }

	// to[i] is, for a wait step i that moves, the index of the Run step
	// it moves before; -1 where it stays.
	to := make([]int, len(p.Steps))
	for i := range to {
		to[i] = -1
	}
	moved := 0
	for s := range p.Streams {
		point := -1 // the Run step of the last op the stream waited before
		var group []int
		for i, st := range p.Steps {
			if int(st.Stream) != s {
				continue
			}
			switch st.Kind {
			case Wait:
				group = append(group, i)
				continue
			case Run:
			default:
				continue
			}
			if len(group) == 0 {
				continue
			}
			movable := point >= 0
			y := int32(-1)
			if movable {
				y = p.Steps[point].Op
			}
			for _, w := range group {
				if !movable {
					break
				}
				e := p.Steps[w].Event
				r := h.recordOp[e]
				// Submitted before y, the record cannot be ordered after
				// it: the wait closes no cycle.
				movable = r >= 0 && h.recordStep[e] < point && end(r) <= int64(sched.Start[y])
			}
			if movable {
				for _, w := range group {
					to[w] = point
				}
				moved += len(group)
			} else {
				point = i
			}
			group = group[:0]
		}
	}
	if moved == 0 {
		return 0
	}
	steps := make([]Step, 0, len(p.Steps))
	before := map[int][]int{} // by Run step: the waits moved before it
	for w, at := range to {
		if at >= 0 {
			before[at] = append(before[at], w)
		}
	}
	for i, st := range p.Steps {
		if to[i] >= 0 {
			continue
		}
		for _, w := range before[i] {
			ws := p.Steps[w]
			ws.Op = st.Op
			steps = append(steps, ws)
		}
		steps = append(steps, st)
	}
	p.Steps = steps
	return moved
}

// order is what gatherWaits and dropImplied know of a plan's
// happens-before order.
type order struct {
	recordOp    []int32   // by event: the op its record follows, or -1
	recordStep  []int     // by event: its Record step's index
	recordClock [][]int32 // by event: its record's vector clock (clocks)
}

// orderOf works out p's order from its steps, in submission order; false
// when a step names a stream, op or event p does not have, or a wait
// comes before its event's record.
func orderOf(p *Plan) (order, bool) {
	ns, ops := len(p.Streams), len(p.Graph.Ops)
	h := order{recordOp: make([]int32, p.Events), recordStep: make([]int, p.Events), recordClock: make([][]int32, p.Events)}
	for i := range h.recordOp {
		h.recordOp[i] = -1
	}
	cur := make([][]int32, ns)
	for s := range cur {
		cur[s] = make([]int32, ns)
	}
	for i, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= ns {
			return h, false
		}
		switch st.Kind {
		case Run:
			if st.Op < 0 || int(st.Op) >= ops {
				return h, false
			}
			cur[s][s]++
		case Record:
			if st.Event < 0 || int(st.Event) >= p.Events {
				return h, false
			}
			h.recordOp[st.Event], h.recordStep[st.Event] = st.Op, i
			h.recordClock[st.Event] = slices.Clone(cur[s])
		case Wait:
			if st.Event < 0 || int(st.Event) >= p.Events || h.recordClock[st.Event] == nil {
				return h, false
			}
			for t, n := range h.recordClock[st.Event] {
				cur[s][t] = max(cur[s][t], n)
			}
		}
	}
	for _, op := range h.recordOp {
		if op >= int32(ops) {
			return h, false
		}
	}
	return h, true
}

// dropImplied drops the waits of p that order nothing more than the
// waits before them, or beside them before the same op, already do
// (gathered waits may: a wait moved up beside another on the same
// stream's later record implies it), then the records no wait is left
// on, numbering the events again; it returns how many waits it dropped.
func dropImplied(p *Plan) int {
	h, ok := orderOf(p)
	if !ok {
		return 0
	}
	ns := len(p.Streams)
	drop := make([]bool, len(p.Steps))
	covered := func(c, by []int32) bool {
		for t, n := range c {
			if n > by[t] {
				return false
			}
		}
		return true
	}
	dropped := 0
	for s := range ns {
		cur := make([]int32, ns)
		var group []int
		for i, st := range p.Steps {
			if int(st.Stream) != s {
				continue
			}
			switch st.Kind {
			case Wait:
				group = append(group, i)
				continue
			case Run:
			default:
				continue
			}
			for _, w := range group {
				with := slices.Clone(cur)
				for _, o := range group {
					if o != w && !drop[o] {
						for t, n := range h.recordClock[p.Steps[o].Event] {
							with[t] = max(with[t], n)
						}
					}
				}
				if covered(h.recordClock[p.Steps[w].Event], with) {
					drop[w] = true
					dropped++
				}
			}
			for _, w := range group {
				for t, n := range h.recordClock[p.Steps[w].Event] {
					cur[t] = max(cur[t], n)
				}
			}
			group = group[:0]
			cur[s]++
		}
	}
	if dropped == 0 {
		return 0
	}
	waited := make([]bool, p.Events)
	for i, st := range p.Steps {
		if st.Kind == Wait && !drop[i] {
			waited[st.Event] = true
		}
	}
	renum := make([]int32, p.Events)
	n := int32(0)
	for e, w := range waited {
		renum[e] = -1
		if w {
			renum[e], n = n, n+1
		}
	}
	steps := p.Steps[:0]
	for i, st := range p.Steps {
		if drop[i] || (st.Kind == Record && renum[st.Event] < 0) {
			continue
		}
		if st.Kind != Run {
			st.Event = renum[st.Event]
		}
		steps = append(steps, st)
	}
	p.Steps, p.Events = steps, int(n)
	return dropped
}
