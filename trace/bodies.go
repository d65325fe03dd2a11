package trace

import (
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// The ops of loops' and branches' bodies in a trace: spans name them by
// dag.Op.Index, a body op runs once per iteration, and the critical path,
// which is the top-level graph's, counts a loop as the time its body took.

// index makes b's tables of the ops of g by Index: the ops, the top-level
// op holding each and whether it is in a loop's body.
func (b *builder) index(g *dag.Graph) {
	if g == nil {
		return
	}
	n := len(g.Ops) + len(g.Nested)
	b.top = len(g.Ops)
	b.ops = make([]*dag.Op, n)
	b.holder = make([]int32, n)
	b.parent = make([]int32, n)
	b.inLoop = make([]bool, n)
	b.iters = make([]int32, n)
	b.counted = make([]int32, n)
	for i := range n {
		b.ops[i] = g.OpAt(i)
	}
	for _, o := range g.Ops {
		b.holder[o.Index], b.parent[o.Index] = int32(o.ID), int32(o.ID)
		b.markBodies(o, int32(o.ID), false)
	}
}

// markBodies notes holder, o as their parent and the loop nesting of the
// ops of o's bodies.
func (b *builder) markBodies(o *dag.Op, holder int32, inLoop bool) {
	inLoop = inLoop || o.Kind.Info().Body == dag.Loop
	for _, body := range o.Bodies() {
		for _, in := range body.Ops {
			if in.Index < 0 || in.Index >= len(b.ops) {
				continue
			}
			b.holder[in.Index], b.parent[in.Index] = holder, int32(o.Index)
			b.inLoop[in.Index] = inLoop
			b.markBodies(in, holder, inLoop)
		}
	}
}

// LoopRun is how many iterations loop Op (its Index, called Name) ran in
// run Run: the most slices any op directly in its body has in the run, or
// the count its backend gave with the loop's span where it timed only a
// sample of them (executor.Span.Iterations). A loop within another counts
// the iterations of all the outer one's.
type LoopRun struct {
	Run        int
	Op         int
	Name       string
	Iterations int
	// Timed is how many of them have slices where that is fewer (a
	// sample, the first ones); 0 when all have.
	Timed int
}

// loopRuns adds the run's LoopRun of every loop whose body has slices.
func (b *builder) loopRuns() {
	for _, o := range b.ops {
		if o == nil || o.Kind.Info().Body != dag.Loop || o.Control == nil || o.Control.Body == nil {
			continue
		}
		n := int32(0)
		for _, in := range o.Control.Body.Ops {
			if in.Index >= 0 && in.Index < len(b.iters) {
				n = max(n, b.iters[in.Index])
			}
		}
		lr := LoopRun{Run: b.run, Op: o.Index, Name: o.Name, Iterations: int(n)}
		if c := b.counted[o.Index]; c > n {
			lr.Iterations, lr.Timed = int(c), int(n)
		}
		if lr.Iterations > 0 {
			b.t.Loops = append(b.t.Loops, lr)
		}
	}
}

// loops sums up Trace.Loops by loop, in the order of the loops' first runs.
func (t *Trace) loops() []LoopSummary {
	var out []LoopSummary
	at := map[int]int{}
	for _, l := range t.Loops {
		i, ok := at[l.Op]
		if !ok {
			i = len(out)
			at[l.Op] = i
			out = append(out, LoopSummary{Name: l.Name, Min: l.Iterations, Max: l.Iterations})
		}
		s := &out[i]
		s.Runs++
		s.Timed = max(s.Timed, l.Timed)
		s.Min, s.Max = min(s.Min, l.Iterations), max(s.Max, l.Iterations)
	}
	return out
}

func chromeLoops(loops []LoopRun) []chromeLoop {
	var out []chromeLoop
	for _, l := range loops {
		out = append(out, chromeLoop{Run: l.Run, OpID: l.Op, Op: l.Name, Iterations: l.Iterations, Timed: l.Timed})
	}
	return out
}

// controlDurations gives each top-level loop or branch that has no slice
// of its own in the run the time from its body's first slice to its last,
// so that the critical path counts it.
func (b *builder) controlDurations() {
	type extent struct{ start, end time.Duration }
	var ext map[int32]*extent
	for _, s := range b.t.Slices[b.runStart:] {
		if s.Op < b.top || s.Op >= len(b.ops) {
			continue
		}
		h := b.holder[s.Op]
		if b.sliceOf[h] >= 0 {
			continue // the backend timed the op itself
		}
		if ext == nil {
			ext = map[int32]*extent{}
		}
		if e := ext[h]; e == nil {
			ext[h] = &extent{s.Start, s.End()}
		} else {
			e.start, e.end = min(e.start, s.Start), max(e.end, s.End())
		}
	}
	for _, lt := range b.t.Tails[b.runTails:] {
		h := b.holder[lt.Op]
		if e := ext[h]; e != nil { // a tail comes after the op's first slices
			e.start, e.end = min(e.start, lt.Start), max(e.end, lt.End)
		}
	}
	for h, e := range ext {
		b.durations[h] = e.end - e.start
	}
}

// controlDetail is the second line of a loop's or branch's label: what it
// reads, and a loop's bound.
func controlDetail(op *dag.Op) string {
	c := op.Control
	if c == nil || c.Cond.Buf == nil {
		return ""
	}
	s := op.Kind.String() + " " + c.Cond.String()
	if c.Max > 0 {
		s += fmt.Sprintf(" (max %d)", c.Max)
	}
	return s
}
