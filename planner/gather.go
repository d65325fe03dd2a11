package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dagrun/dagrun/planner/perf"
)

// Gathering says whether New moves waits up their stream (the gather
// pass).
type Gathering uint8

const (
	// GatherAuto (the default) moves the waits before an op up to the op
	// before which its stream last waited, where the cost model has their
	// events reached by then.
	GatherAuto Gathering = iota
	// GatherNone leaves every wait before the op that needs it.
	GatherNone

	numGatherings // keep last
)

var gatherNames = [numGatherings]string{GatherAuto: "auto", GatherNone: "none"}

func (g Gathering) String() string {
	if g < numGatherings {
		return gatherNames[g]
	}
	return fmt.Sprintf("Gathering(%d)", uint8(g))
}

// Gather sets whether the gather pass moves waits up: GatherAuto (the
// default) where it pays, GatherNone never.
func Gather(g Gathering) Option { return func(o *Options) { o.Gather = g } }

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
// never less, and the pass moves none that would close a cycle. The cost
// model has no price for a wait on the device, so it sees no gain; in an
// eager run it sees the moved wait's submission come sooner, which can
// hold back another stream's by the host's cost of a wait.
type gatherPass struct{}

func (gatherPass) Name() string { return "gather" }
func (gatherPass) Scope() Scope { return ScopeEvents }

func (gatherPass) Run(s *State) (string, error) {
	p := s.Plan
	if p == nil || p.Graph == nil || p.Events == 0 {
		return "no wait moved", nil
	}
	cost, mode := s.Options.Cost, s.Options.Mode
	// The ops' costs, as the candidates were placed with them.
	var dur []int64
	var fill []bool
	if c := s.costs; c != nil && len(c.dur) == len(p.Graph.Ops) {
		dur, fill = c.dur, c.fill
	} else {
		dur = perf.Durations(p, cost)
	}
	ov := perf.OverheadsOf(cost)
	start := s.starts[p] // the events pass's schedule of the plan kept
	s.starts = nil
	if len(start) != len(dur) {
		start = make([]int64, len(dur))
		perf.SimulateWith(p, dur, fill, ov, mode, start)
	}
	n := gatherWaits(p, dur, start)
	if n == 0 {
		return "no wait moved", nil
	}
	dropped := dropImplied(p)
	p.Stats.Waits -= dropped
	makespan, _ := perf.SimulateWith(p, dur, fill, ov, mode, nil)
	p.Stats.Makespan = time.Duration(makespan)
	return strconv.Itoa(n) + " " + plural(n, "wait", "waits") + " moved up to an earlier one, " + strconv.Itoa(dropped) + " then implied by others dropped", nil
}

// gatherWaits moves up the waits of p that it can (gatherPass), given each
// op's duration and start in the cost model's schedule, and returns how
// many it moved. All the waits before an op move, or none: a wait left
// there would keep the op from following its predecessor. The steps are
// rearranged in place.
func gatherWaits(p *Plan, dur, start []int64) int {
	ns, ops := len(p.Streams), len(p.Graph.Ops)
	recordStep := make([]int32, p.Events)
	for i := range recordStep {
		recordStep[i] = -1
	}
	for i, st := range p.Steps {
		if st.Kind == Record && st.Event >= 0 && int(st.Event) < p.Events && st.Op >= 0 && int(st.Op) < ops {
			recordStep[st.Event] = int32(i)
		}
	}
	// point is, by stream, the Run step of the last op it waited before;
	// waits gathers the Wait steps since its last Run.
	point, waits := make([]int32, ns), make([][]int32, ns)
	for s := range point {
		point[s] = -1
	}
	moved, points := newBits(len(p.Steps)), newBits(len(p.Steps))
	n := 0
	for i, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= ns {
			return 0
		}
		switch st.Kind {
		case Wait:
			waits[s] = append(waits[s], int32(i))
			continue
		case Run:
		default:
			continue
		}
		ws := waits[s]
		if len(ws) == 0 {
			continue
		}
		waits[s] = ws[:0]
		at := point[s]
		ok := at >= 0
		for _, w := range ws {
			if !ok {
				break
			}
			e := p.Steps[w].Event
			if e < 0 || int(e) >= p.Events || recordStep[e] < 0 {
				return 0
			}
			// Submitted before the point's op, the record cannot be
			// ordered after it: the wait closes no cycle.
			r := p.Steps[recordStep[e]].Op
			ok = recordStep[e] < at && start[r]+dur[r] <= start[p.Steps[at].Op]
		}
		if !ok {
			point[s] = int32(i)
			points.set(i)
			continue
		}
		for _, w := range ws {
			moved.set(int(w))
		}
		n += len(ws)
	}
	if n == 0 {
		return 0
	}
	// From the end: a moved wait is set aside, and written with the others
	// of its stream before the next point's Run met (its target, the
	// stream's last point before it). Writing stays at or after reading:
	// the waits set aside outnumber those written back.
	aside := make([][]Step, ns)
	j := len(p.Steps) - 1
	for i := len(p.Steps) - 1; i >= 0; i-- {
		st := p.Steps[i]
		if moved.has(i) {
			aside[st.Stream] = append(aside[st.Stream], st)
			continue
		}
		p.Steps[j] = st
		j--
		if st.Kind == Run && points.has(i) {
			for _, w := range aside[st.Stream] { // latest first: written last to first
				w.Op = st.Op
				p.Steps[j] = w
				j--
			}
			aside[st.Stream] = aside[st.Stream][:0]
		}
	}
	return n
}

// dropImplied drops the waits of p that order nothing more than the waits
// before them, or beside them before the same op, already do (a wait
// gathered beside another may imply it, or be implied by it), then the
// records no wait is left on, numbering the events again; it returns how
// many waits it dropped. It follows each stream's vector clock (as the
// events pass does, events.go): a wait is implied when its stream is
// ordered after the op its event follows, and waits beside each other go
// latest record first, as the events pass adds them, so that none left
// implies one before it.
func dropImplied(p *Plan) int {
	ns := len(p.Streams)
	cur := make([][]int32, ns) // by stream: its clock
	for s := range cur {
		cur[s] = make([]int32, ns)
	}
	// A record's clock is its stream's at the record: the stream's own
	// count, kept by event, and the others, kept in store once for every
	// record made between two of the stream's waits.
	groups := 0
	for i, st := range p.Steps {
		if st.Kind == Wait && (i == 0 || p.Steps[i-1].Kind != Wait || p.Steps[i-1].Stream != st.Stream) {
			groups++
		}
	}
	store := make([]int32, 0, (groups+ns)*ns)
	snap := make([]int32, ns) // by stream: its clock's place in store; -1: changed since
	for s := range snap {
		snap[s] = -1
	}
	type record struct{ clock, stream, own, step int32 }
	recs := make([]record, p.Events)
	drop := newBits(len(p.Steps))
	waits := make([][]int32, ns)
	dropped := 0
	for i, st := range p.Steps {
		s := st.Stream
		switch st.Kind {
		case Record:
			if snap[s] < 0 {
				snap[s] = int32(len(store))
				store = append(store, cur[s]...)
			}
			recs[st.Event] = record{clock: snap[s], stream: s, own: cur[s][s], step: int32(i)}
		case Wait:
			waits[s] = append(waits[s], int32(i))
		case Run:
			ws := waits[s]
			if len(ws) > 1 {
				slices.SortFunc(ws, func(a, b int32) int {
					return cmp.Compare(recs[p.Steps[b].Event].step, recs[p.Steps[a].Event].step)
				})
			}
			for _, w := range ws {
				r := recs[p.Steps[w].Event]
				if cur[s][r.stream] >= r.own {
					drop.set(int(w))
					dropped++
					continue
				}
				for t, n := range store[r.clock : r.clock+int32(ns)] {
					cur[s][t] = max(cur[s][t], n)
				}
				cur[s][r.stream] = max(cur[s][r.stream], r.own)
				snap[s] = -1
			}
			waits[s] = ws[:0]
			cur[s][s]++
		}
	}
	if dropped == 0 {
		return 0
	}
	waited := make([]bool, p.Events)
	for i, st := range p.Steps {
		if st.Kind == Wait && !drop.has(i) {
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
		if drop.has(i) || (st.Kind == Record && renum[st.Event] < 0) {
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

// bits is a set of small non-negative ints.
type bits []uint64

func newBits(n int) bits      { return make(bits, (n+63)/64) }
func (b bits) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
