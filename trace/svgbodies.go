package trace

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Loops and branches in the pictures. A plan picture draws the body of
// each loop or branch as a dashed box: the body's ops on its own streams'
// lanes, which follow the lane of the control op, at the times one pass
// of the body takes when its plan is simulated on its own, from the
// control op's start. A timeline of a run brackets the iterations of
// each loop on the lane its body's ops ran on.

// The geometry of bodies in a picture, in pixels.
const (
	bodyRow    = 18 // the header row above a body's lanes, for its label
	bodyPad    = 6  // below a body's last lane, so that nested boxes part
	bodyIndent = 10 // the lane labels of a body, per level of nesting
)

// The colours of body boxes and loop brackets.
const (
	bodyStroke = "#6b5a99"
	bodyText   = "#4a3d6b"
)

// bodyBox is one body of a loop or branch in a plan picture.
type bodyBox struct {
	first, last int // the lanes it spans (Trace.Lanes), those of bodies within it included
	depth       int // 1 for the body of a top-level op
	start, end  time.Duration
	op          string     // the control op's name
	kind        dag.OpKind // While or If
	which       string     // "body", "then" or "else"
	label       string     // drawn in its header row
	hover       string
}

// planBodies adds the bodies of p's loops and branches (p.Bodies) to t,
// the trace FromPlan made of p: after each control op's lane, the lanes
// of its bodies' streams, with their ops' slices and waits, and a box per
// body. Lane indices move; slices and flows keep their places, the
// bodies' coming after them. It returns the boxes (outer ones before the
// boxes within them) and each lane's nesting depth; none for a plan
// without bodies.
func planBodies(t *Trace, p *planner.Plan) ([]bodyBox, []int) {
	if len(p.Bodies) == 0 || p.Graph == nil {
		return nil, nil
	}
	e := &bodyExpander{t: t}
	// The control ops on each lane, by start.
	controls := make([][]int, len(t.Lanes))
	for i, s := range t.Slices {
		if op := p.Graph.OpAt(s.Op); op != nil && op.ID == s.Op && len(p.Bodies[op.ID]) > 0 {
			controls[s.Lane] = append(controls[s.Lane], i)
		}
	}
	top := len(t.Slices) // FromPlan's; the bodies' come after them
	newLane := make([]int, len(t.Lanes))
	for i, l := range t.Lanes {
		newLane[i] = len(e.lanes)
		e.lanes = append(e.lanes, l)
		e.depth = append(e.depth, 0)
		for _, si := range controls[i] {
			s := t.Slices[si]
			e.bodies(p, p.Graph.OpAt(s.Op), s.Start, 1)
		}
	}
	for i := range t.Slices[:top] {
		t.Slices[i].Lane = newLane[t.Slices[i].Lane]
	}
	t.Lanes = e.lanes
	return e.boxes, e.depth
}

// bodyExpander collects the lanes, slices and boxes of bodies.
type bodyExpander struct {
	t     *Trace
	lanes []Lane
	depth []int
	boxes []bodyBox
}

// bodies adds the bodies of control op op of plan p, starting at start,
// at nesting depth depth.
func (e *bodyExpander) bodies(p *planner.Plan, op *dag.Op, start time.Duration, depth int) {
	graphs := op.Bodies()
	for i, bp := range p.Bodies[op.ID] {
		if bp == nil || bp.Graph == nil || i >= len(graphs) || bp.Graph != graphs[i] {
			continue
		}
		sched := perf.Simulate(bp, nil, planner.Replay) // as the planner prices a body
		box := bodyBox{first: len(e.lanes), depth: depth, start: start, end: start + sched.Makespan,
			op: op.Name, kind: op.Kind, which: "body"}
		if op.Kind.Info().Body == dag.Branch {
			box.which = [...]string{"then", "else"}[min(i, 1)]
		}
		box.label, box.hover = bodyLabel(op, box.which, sched.Makespan, len(bp.Streams))
		at := len(e.boxes)
		e.boxes = append(e.boxes, box)

		lanes, laneOf := lanesOf(bp.Streams)
		laneAt := make([]int, len(lanes)) // the body's lanes in the picture
		// The ops of each of its streams that run bodies of their own.
		controls := make([][]*dag.Op, len(lanes))
		for _, st := range bp.Steps {
			if st.Kind != planner.Run || st.Op < 0 || int(st.Op) >= len(bp.Graph.Ops) || st.Stream < 0 || int(st.Stream) >= len(laneOf) {
				continue
			}
			if o := bp.Graph.Ops[st.Op]; o != nil && len(bp.Bodies[o.ID]) > 0 {
				controls[laneOf[st.Stream]] = append(controls[laneOf[st.Stream]], o)
			}
		}
		for j, l := range lanes {
			l.Stream = -1 // not a stream of the plan's own
			laneAt[j] = len(e.lanes)
			e.lanes = append(e.lanes, l)
			e.depth = append(e.depth, depth)
			for _, o := range controls[j] {
				e.bodies(bp, o, start+sched.Start[o.ID], depth+1)
			}
		}
		e.boxes[at].last = len(e.lanes) - 1
		e.slices(bp, sched, start, laneOf, laneAt)
	}
}

// slices adds the slices and waits of body plan bp, simulated as sched,
// from start; laneOf maps its streams to its lanes, laneAt those to the
// picture's.
func (e *bodyExpander) slices(bp *planner.Plan, sched perf.Schedule, start time.Duration, laneOf, laneAt []int) {
	sliceOf := make([]int, len(bp.Graph.Ops))
	for i := range sliceOf {
		sliceOf[i] = -1
	}
	var b builder
	for _, st := range bp.Steps {
		id, s := int(st.Op), int(st.Stream)
		if st.Kind != planner.Run || id < 0 || id >= len(bp.Graph.Ops) || id >= len(sched.Start) || s < 0 || s >= len(laneOf) {
			continue
		}
		op := bp.Graph.Ops[id]
		if op == nil {
			continue
		}
		sl := Slice{Op: op.Index, Name: op.Name, Kind: op.Kind, Lane: laneAt[laneOf[s]], Start: start + sched.Start[id], Dur: sched.Duration[id],
			Bytes: op.Bytes(), Path: copyPath(bp, op)}
		if op.Kernel() != nil {
			sl.Grid, sl.Block = op.Launch.Grid, op.Launch.Block
		}
		sl.Reads, sl.Writes = b.views(op)
		sliceOf[id] = len(e.t.Slices)
		e.t.Slices = append(e.t.Slices, sl)
	}
	// The body's own waits; those of its fork and join (op -1) join no
	// two ops.
	recordedAfter := make([]int32, bp.Events)
	for i := range recordedAfter {
		recordedAfter[i] = -1
	}
	for _, st := range bp.Steps {
		ev := int(st.Event)
		if ev < 0 || ev >= len(recordedAfter) || st.Op < 0 || int(st.Op) >= len(sliceOf) {
			continue
		}
		switch st.Kind {
		case planner.Record:
			recordedAfter[ev] = st.Op
		case planner.Wait:
			if from := recordedAfter[ev]; from >= 0 && sliceOf[from] >= 0 && sliceOf[st.Op] >= 0 {
				e.t.Flows = append(e.t.Flows, Flow{Event: ev, From: sliceOf[from], To: sliceOf[st.Op]})
			}
		}
	}
}

// bodyLabel is the header of a body's box, and its hover text: the
// control op's name, which body, what it reads and, for a loop, how long
// one pass takes.
func bodyLabel(op *dag.Op, which string, pass time.Duration, streams int) (label, hover string) {
	detail := controlDetail(op)
	if detail == "" {
		detail = op.Kind.String()
	}
	name := op.Name
	if op.Kind.Info().Body == dag.Branch {
		name += " " + which
	}
	if op.Kind.Info().Body == dag.Loop {
		label = fmt.Sprintf("%s · %s · one pass %s", name, detail, fmtDur(pass))
		hover = fmt.Sprintf("%s: the body of %s on %d streams\none pass estimated %s; the loop runs it while the flag is non-zero, iterations unknown when planning", op.Name, detail, streams, fmtDur(pass))
		return label, hover
	}
	label = fmt.Sprintf("%s · %s · %s", name, detail, fmtDur(pass))
	branch := "non-zero"
	if which == "else" {
		branch = "zero"
	}
	hover = fmt.Sprintf("%s: the %s branch of %s on %d streams, taken when the flag is %s\nestimated %s", op.Name, which, detail, streams, branch, fmtDur(pass))
	return label, hover
}

// layoutBodies is layout for a picture with body boxes: a header row
// above each box's first lane and a gap below its last.
func (pic *picture) layoutBodies(l *layout) {
	starts := make([]int, len(pic.t.Lanes)) // the box whose first lane it is, plus one
	ends := make([][]int, len(pic.t.Lanes)) // the boxes whose last lane it is, innermost first
	for i, b := range pic.boxes {
		if b.first < 0 || b.last < b.first || b.last >= len(pic.t.Lanes) {
			continue
		}
		starts[b.first] = i + 1
		ends[b.last] = append(ends[b.last], i)
	}
	for _, e := range ends {
		slices.Reverse(e) // outer boxes come before the boxes within them
	}
	pic.boxTop = make([]float64, len(pic.boxes))
	pic.boxBottom = make([]float64, len(pic.boxes))
	y := float64(axisTop + axisHeight)
	l.laneY = l.laneY[:0]
	l.groups = l.groups[:0]
	for i, lane := range pic.t.Lanes {
		if i == 0 || pic.t.Lanes[i-1].Process() != lane.Process() {
			l.groups = append(l.groups, struct {
				y    float64
				name string
			}{y, lane.Process()})
			y += groupRow
		}
		if b := starts[i]; b > 0 {
			pic.boxTop[b-1] = y
			y += bodyRow
		}
		l.laneY = append(l.laneY, y)
		y += laneHeight
		for _, b := range ends[i] {
			y += bodyPad
			pic.boxBottom[b] = y - 2
		}
	}
	l.bottom = y
}

// drawBodies draws the boxes of a plan picture's bodies, beneath the
// waits and ops.
func (pic *picture) drawBodies(w *bufio.Writer, l *layout) {
	for i, b := range pic.boxes {
		if i >= len(pic.boxTop) || pic.boxBottom[i] == 0 {
			continue
		}
		top, bottom := pic.boxTop[i], pic.boxBottom[i]
		x0, x1 := l.x(b.start), l.x(b.end)
		width := max(x1-x0, 2)
		inset := float64(b.depth-1) * 2 // nested boxes that end together stay apart
		fmt.Fprintf(w, `<g class="body" data-op="%s" data-body="%s"><title>%s</title>`, esc(b.op), b.which, esc(b.hover))
		head := b.kind.String() + " " + b.op
		if b.kind == dag.If {
			head += " " + b.which
		}
		indent := float64(b.depth-1) * bodyIndent
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="11" font-weight="bold" fill="%s">%s</text>`, 8+indent, top+12, bodyText, esc(clip(head, (labelWidth-12-int(indent))/7)))
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="4" fill="%s" fill-opacity="0.18" stroke="%s" stroke-width="1.2" stroke-dasharray="5,3"/>`,
			x0-inset, top+1, width+2*inset, bottom-top-1, kindFill(b.kind, planner.Compute), bodyStroke)
		if room := int((float64(plotRight+20) - x0 - 4) / charWidth); room > 3 {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`, x0-inset+4, top+12, bodyText, esc(clip(b.label, room)))
		}
		w.WriteString("</g>\n")
	}
}

// sliceLabel is what a slice's box says: its op's name, and for an op of
// a loop's body its iteration, "jx #3".
func sliceLabel(s Slice) string {
	if s.Loop {
		return fmt.Sprintf("%s #%d", s.Name, s.Iter)
	}
	return s.Name
}

// loopBracket is a thin bracket over the iterations of one loop in one
// run on one lane of a timeline, ticked where each iteration starts.
type loopBracket struct {
	lane       int
	depth      int // 0 for a top-level loop, 1 for one within a body
	start, end time.Duration
	ticks      []time.Duration // the starts of iterations after the first
	name       string
	iterations int
	of         int // the loop's iterations in the run where only the first were timed (LoopRun.Timed); 0 otherwise
}

// loopBrackets brackets the iterations of t's loops (Trace.Loops): for a
// top-level loop, one bracket per run and lane over all the slices of
// its body (those of bodies within it included), ticked at the first
// slice of each iteration of the ops directly in its body; for a loop
// within a body, a bracket over the slices of the ops directly in its
// body, one per iteration of the top-level loop around it. Nil when t
// has no slices of loops' bodies or no Loops (a trace of an older
// dagrun has no Slice.Holder to group them by).
func (t *Trace) loopBrackets() []loopBracket {
	if len(t.Loops) == 0 {
		return nil
	}
	names := map[int]string{}
	type runLoop struct{ run, loop int }
	sampled := map[runLoop]int{}
	for _, l := range t.Loops {
		names[l.Op] = l.Name
		if l.Timed > 0 {
			sampled[runLoop{l.Run, l.Op}] = l.Iterations
		}
	}
	type key struct{ run, lane, loop int }
	type group struct {
		start, end time.Duration
		iters      map[int]time.Duration // by Iter: its first slice's start
		untraced   int                   // iterations past the slices kept (Trace.Tails)
	}
	groups := map[key]*group{}
	var keys []key // in the order of their first slices
	note := func(k key, s *Slice, direct bool) {
		g := groups[k]
		if g == nil {
			g = &group{start: s.Start, end: s.End(), iters: map[int]time.Duration{}}
			groups[k] = g
			keys = append(keys, k)
		}
		g.start, g.end = min(g.start, s.Start), max(g.end, s.End())
		if direct {
			if at, ok := g.iters[s.Iter]; !ok || s.Start < at {
				g.iters[s.Iter] = s.Start
			}
		}
	}
	for i := range t.Slices {
		s := &t.Slices[i]
		if !s.Loop {
			continue
		}
		if _, ok := names[s.Holder]; ok {
			note(key{s.Run, s.Lane, s.Holder}, s, s.Parent == s.Holder)
		}
		if _, ok := names[s.Parent]; ok && s.Parent != s.Holder {
			note(key{s.Run, s.Lane, s.Parent}, s, true)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	for _, lt := range t.Tails {
		if g := groups[key{lt.Run, lt.Lane, lt.Holder}]; g != nil && lt.Parent == lt.Holder {
			g.end = max(g.end, lt.End)
			g.untraced = max(g.untraced, lt.Slices)
		}
	}
	// The iteration starts of each top-level loop, by run and lane, to
	// part the brackets of the loops within it.
	outer := map[key][]time.Duration{}
	var out []loopBracket
	for _, k := range keys {
		g := groups[k]
		starts := make([]time.Duration, 0, len(g.iters))
		for _, at := range g.iters {
			starts = append(starts, at)
		}
		slices.Sort(starts)
		outer[k] = starts
	}
	// Which top-level loop holds each inner one, and the slices of each
	// inner one's body by run and lane, in one pass: a pass per inner loop
	// would be quadratic in a trace of many.
	holderOf := map[int]int{}
	innerSlices := map[key][]int32{}
	for i, s := range t.Slices {
		if s.Loop && s.Parent != s.Holder {
			holderOf[s.Parent] = s.Holder
			k := key{s.Run, s.Lane, s.Parent}
			innerSlices[k] = append(innerSlices[k], int32(i))
		}
	}
	for _, k := range keys {
		g, starts := groups[k], outer[k]
		h, inner := holderOf[k.loop]
		if !inner {
			out = append(out, loopBracket{lane: k.lane, start: g.start, end: g.end, ticks: tail(starts), name: names[k.loop],
				iterations: len(starts) + g.untraced, of: sampled[runLoop{k.run, k.loop}]})
			continue
		}
		// Part an inner loop's iterations by the outer loop's.
		parts := outer[key{k.run, k.lane, h}]
		type piece struct {
			start, end time.Duration
			iters      map[int]time.Duration
		}
		var pieces []*piece
		byPart := map[int]*piece{}
		for _, i := range innerSlices[k] {
			s := &t.Slices[i]
			p, _ := slices.BinarySearch(parts, s.Start+1)
			pc := byPart[p]
			if pc == nil {
				pc = &piece{start: s.Start, end: s.End(), iters: map[int]time.Duration{}}
				byPart[p] = pc
				pieces = append(pieces, pc)
			}
			pc.start, pc.end = min(pc.start, s.Start), max(pc.end, s.End())
			if at, ok := pc.iters[s.Iter]; !ok || s.Start < at {
				pc.iters[s.Iter] = s.Start
			}
		}
		for _, pc := range pieces {
			starts := make([]time.Duration, 0, len(pc.iters))
			for _, at := range pc.iters {
				starts = append(starts, at)
			}
			slices.Sort(starts)
			out = append(out, loopBracket{lane: k.lane, depth: 1, start: pc.start, end: pc.end, ticks: tail(starts), name: names[k.loop], iterations: len(starts)})
		}
	}
	return out
}

func tail(s []time.Duration) []time.Duration {
	if len(s) == 0 {
		return nil
	}
	return s[1:]
}

// drawBrackets draws a timeline's loop brackets in the top margin of
// their lanes, a loop within a body's a little lower.
func (pic *picture) drawBrackets(w *bufio.Writer, l *layout) {
	for _, b := range pic.brackets {
		if b.lane < 0 || b.lane >= len(l.laneY) {
			continue
		}
		y := l.laneY[b.lane] + 1.5 + float64(b.depth)*2.5
		x0, x1 := l.x(b.start), max(l.x(b.end), l.x(b.start)+2)
		mean := time.Duration(0)
		if b.iterations > 0 {
			mean = (b.end - b.start) / time.Duration(b.iterations)
		}
		what := fmt.Sprintf("%d iterations", b.iterations)
		if b.of > b.iterations {
			what = fmt.Sprintf("the first %d of its %d iterations (a sample timed op by op)", b.iterations, b.of)
		}
		fmt.Fprintf(w, `<g class="loop" data-op="%s" data-iterations="%d"><title>%s</title>`, esc(b.name), b.iterations,
			esc(fmt.Sprintf("loop %s: %s from %s to %s, %s each on average", b.name, what, fmtDur(b.start), fmtDur(b.end), fmtDur(mean))))
		var d strings.Builder
		fmt.Fprintf(&d, "M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f", x0, y+3, x0, y, x1, y, x1, y+3)
		for _, t := range b.ticks {
			x := l.x(t)
			fmt.Fprintf(&d, " M%.1f,%.1f L%.1f,%.1f", x, y, x, y+2)
		}
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="1"/>`, d.String(), bodyStroke)
		w.WriteString("</g>\n")
	}
}
