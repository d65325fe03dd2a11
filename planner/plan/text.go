package plan

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/internal/human"

	"github.com/dagrun/dagrun/dag"
)

// StreamSteps returns stream s's instruction list: its steps in submission
// order. It is empty for a stream the plan does not have.
func (p *Plan) StreamSteps(s int) []Step {
	var out []Step
	for _, st := range p.Steps {
		if int(st.Stream) == s {
			out = append(out, st)
		}
	}
	return out
}

// WriteText writes the plan for people: each stream's instructions in
// order, each loop's or branch's bodies indented under it, then the
// plan's figures.
func (p *Plan) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p.writeStreams(bw, "")
	bw.WriteByte('\n')
	p.writeFigures(bw)
	p.writeFused(bw) // fused.go
	p.writePieces(bw)
	p.writeMemory(bw)
	p.writeBudget(bw)
	return bw.Flush()
}

// WritePasses writes what each pass of the planning did and cost
// (Plan.Passes), one line each under "passes": its name, its time, how
// often it ran when not once (order, place and events run once per
// candidate plan), and its summary. WriteText leaves it out, as times
// differ from run to run.
func (p *Plan) WritePasses(w io.Writer) error {
	if len(p.Passes) == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	bw.WriteString("passes\n")
	for _, r := range p.Passes {
		runs := ""
		if r.Runs != 1 {
			runs = fmt.Sprintf(" x%d", r.Runs)
		}
		fmt.Fprintf(bw, "  %-9s %9s%-4s %s\n", r.Name, formatDuration(r.Took), runs, r.Summary)
	}
	return bw.Flush()
}

// writeStreams writes each stream's instructions, every line after indent.
func (p *Plan) writeStreams(bw *bufio.Writer, indent string) {
	// The steps by stream, in order: stream s's are the indices
	// order[first[s]:first[s+1]] of p.Steps.
	first := make([]int, len(p.Streams)+1)
	for _, st := range p.Steps {
		if int(st.Stream) >= 0 && int(st.Stream) < len(p.Streams) {
			first[st.Stream+1]++
		}
	}
	for s := range p.Streams {
		first[s+1] += first[s]
	}
	order := make([]int32, first[len(p.Streams)])
	next := slices.Clone(first)
	for i, st := range p.Steps {
		if int(st.Stream) >= 0 && int(st.Stream) < len(p.Streams) {
			order[next[st.Stream]] = int32(i)
			next[st.Stream]++
		}
	}
	sources := p.eventSources()
	for s, str := range p.Streams {
		fmt.Fprintf(bw, "%sstream %s (device %d, priority %s, %s)\n", indent, str.Name, str.Device, str.Priority, str.Kind)
		for _, i := range order[first[s]:first[s+1]] {
			bw.WriteString(indent)
			bw.WriteString("  ")
			st := p.Steps[i]
			p.writeStep(bw, st, sources)
			bw.WriteByte('\n')
			if st.Kind == Run {
				p.writeBodies(bw, st.Op, indent+"    ")
			}
		}
	}
}

// writeBodies writes the plans of the bodies of control op id, if it is
// one, under a line that says when each runs.
func (p *Plan) writeBodies(bw *bufio.Writer, id int32, indent string) {
	op := p.op(id)
	if op == nil || p.Bodies[int(id)] == nil {
		return
	}
	for i, body := range p.Bodies[int(id)] {
		what := "body, while the flag is non-zero"
		if set := op.CondSetter(); set != nil {
			// Backends may compute the condition in that launch (cuda's
			// conditional node then runs no kernel of its own).
			what += ", which " + set.Name + " sets last"
		}
		switch {
		case op.Kind.Info().Body == dag.Branch && i == 0:
			what = "then, when the flag is non-zero"
		case op.Kind.Info().Body == dag.Branch:
			what = "else, when the flag is zero"
		}
		fmt.Fprintf(bw, "%s%s (%s, %s, one pass %s):\n", indent, op.Name, what, human.Count(len(body.Streams), "stream", "streams"), formatDuration(body.Stats.Makespan))
		body.writeStreams(bw, indent+"  ")
	}
}

func (p *Plan) writeStep(w *bufio.Writer, st Step, sources []eventSource) {
	switch st.Kind {
	case Record:
		b := append(w.AvailableBuffer(), "record e"...)
		w.Write(strconv.AppendInt(b, int64(st.Event), 10))
	case Wait:
		b := append(w.AvailableBuffer(), "wait e"...)
		b = strconv.AppendInt(b, int64(st.Event), 10)
		if int(st.Event) < len(sources) && sources[st.Event].op >= 0 {
			src := sources[st.Event]
			b = append(b, " (from "...)
			b = append(b, p.streamName(src.stream)...)
			b = append(b, " after op "...)
			b = append(b, p.opName(src.op)...)
			b = append(b, ')')
		} else if int(st.Event) < len(sources) && sources[st.Event].stream >= 0 {
			// A body's fork: recorded before its entry stream runs anything.
			b = append(b, " (from "...)
			b = append(b, p.streamName(sources[st.Event].stream)...)
			b = append(b, " at its start)"...)
		}
		w.Write(b)
	case Run:
		op := p.op(st.Op)
		if op == nil {
			fmt.Fprintf(w, "run #%d", st.Op)
			return
		}
		writeOp(w, op)
		if path := p.CopyPath(op); path != "" {
			w.WriteString(" [")
			w.WriteString(path)
			w.WriteByte(']')
		}
		if p.IsEarly(int(st.Op)) {
			w.WriteString(" early")
		}
	default:
		fmt.Fprintf(w, "%s", st.Kind)
	}
}

// describers write an op of a kind as an instruction of the text plan; a
// kind without one is written as its kind and name.
var describers = [...]func(w *bufio.Writer, op *dag.Op){
	dag.Alloc:    describeLifetime,
	dag.Free:     describeLifetime,
	dag.Copy:     describeCopy,
	dag.Fill:     describeFill,
	dag.Memset2D: describeMemset2D,
	dag.Launch:   describeLaunch,
	dag.Gemm:     describeGemm, // fused.go
	dag.While:    describeControl,
	dag.If:       describeControl,
}

// writeOp describes one op as an instruction, as its kind's describer says.
func writeOp(w *bufio.Writer, op *dag.Op) {
	if int(op.Kind) < len(describers) && describers[op.Kind] != nil {
		d := describers[op.Kind]
		d(w, op)
		return
	}
	fmt.Fprintf(w, "%s %s", op.Kind, op.Name)
}

// The describers below run once per op of a plan's text, so they append
// to the writer's free space rather than format with fmt.

func describeLaunch(w *bufio.Writer, op *dag.Op) {
	b := append(w.AvailableBuffer(), "launch "...)
	b = append(b, op.Name...)
	if l := op.Launch; l != nil {
		b = append(b, " ["...)
		if l.Kernel != nil {
			b = append(b, l.Kernel.Name...)
			b = append(b, ' ')
		}
		b = append(b, "grid "...)
		b = l.Grid.Append(b)
		b = append(b, " block "...)
		b = l.Block.Append(b)
		if l.Shared > 0 {
			b = append(b, " shared "...)
			b = dag.AppendBytes(b, int64(l.Shared))
		}
		b = append(b, ']')
	}
	w.Write(b)
}

func describeCopy(w *bufio.Writer, op *dag.Op) {
	b := append(w.AvailableBuffer(), "copy "...)
	b = append(b, op.Name...)
	if len(op.Access) == 2 && op.Access[0].Buf != nil && op.Access[1].Buf != nil {
		b = append(b, " ("...)
		b = dag.AppendBytes(b, op.Bytes())
		b = append(b, ' ')
		b = append(b, CopyDirection(op).String()...)
		b = append(b, ", "...)
		b = op.Access[0].View.Append(b)
		b = append(b, " -> "...)
		b = op.Access[1].View.Append(b)
		b = append(b, ')')
	}
	w.Write(b)
}

func describeFill(w *bufio.Writer, op *dag.Op) {
	b := append(w.AvailableBuffer(), "fill "...)
	b = append(b, op.Name...)
	if len(op.Access) > 0 {
		b = append(b, " ("...)
		b = op.Access[0].View.Append(b)
		b = append(b, " = "...)
		b = strconv.AppendFloat(b, op.FillValue, 'g', -1, 64)
		b = append(b, ')')
	}
	w.Write(b)
}

func describeMemset2D(w *bufio.Writer, op *dag.Op) {
	fmt.Fprintf(w, "memset2d %s", op.Name)
	if m := op.Memset2D; m != nil && len(op.Access) > 0 {
		fmt.Fprintf(w, " (%s: %d rows x %d, pitch %d = %g)", op.Access[0].View, m.Rows, m.Width, m.Pitch, op.FillValue)
	}
}

func describeLifetime(w *bufio.Writer, op *dag.Op) {
	if b := op.Buffer(); b != nil {
		fmt.Fprintf(w, "%s %s (%s)", op.Kind, b.Name, dag.FormatBytes(b.Size))
	} else {
		fmt.Fprintf(w, "%s %s", op.Kind, op.Name)
	}
}

func (p *Plan) writeFigures(w *bufio.Writer) {
	s := p.Stats
	fmt.Fprintf(w, "ops                 %d\n", s.Ops)
	fmt.Fprintf(w, "streams             %d\n", s.Streams)
	for _, g := range p.streamGroups() {
		fmt.Fprintf(w, "  dev%d %-8s %s\n", g.device, g.priority, g.counts)
	}
	fmt.Fprintf(w, "cross-stream edges  %d\n", s.CrossEdges)
	fmt.Fprintf(w, "waits inserted      %d (%d cross-stream edges already ordered by earlier waits)\n", s.Waits, s.CrossEdges-s.Waits)
	run := "eager run"
	if s.Mode == Replay {
		run = "graph replay"
	}
	fmt.Fprintf(w, "estimated makespan  %s (%s, %s placement)\n", formatDuration(s.Makespan), run, s.Strategy)
	fmt.Fprintf(w, "critical path       %s", formatDuration(s.CriticalPath))
	if s.CriticalPath > 0 {
		fmt.Fprintf(w, " (makespan / critical path = %.2f)", float64(s.Makespan)/float64(s.CriticalPath))
	}
	w.WriteByte('\n')
	if n := p.EarlyOps(); n > 0 {
		// Only where there are some, so that plans without stay as they were.
		fmt.Fprintf(w, "early launches      PDL on %d %s (launched while the kernel before them runs, on sm_90 and later)\n", n, plural(n, "edge", "edges"))
	}
}

// streamGroup counts the streams of one device and priority by kind.
type streamGroup struct {
	device   int
	priority dag.Priority
	counts   string // "2 compute, 1 h2d"
}

// streamGroups lists the plan's streams per device (ascending) and
// priority (highest first).
func (p *Plan) streamGroups() []streamGroup {
	type key struct {
		device   int
		priority dag.Priority
	}
	var keys []key
	counts := map[key]map[StreamKind]int{}
	for _, s := range p.Streams {
		k := key{s.Device, s.Priority}
		if counts[k] == nil {
			counts[k] = map[StreamKind]int{}
			keys = append(keys, k)
		}
		counts[k][s.Kind]++
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(b.priority, a.priority))
	})
	groups := make([]streamGroup, len(keys))
	for i, k := range keys {
		var parts []string
		for _, kind := range StreamKinds() {
			if n := counts[k][kind]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, kind))
			}
		}
		groups[i] = streamGroup{device: k.device, priority: k.priority, counts: strings.Join(parts, ", ")}
	}
	return groups
}

// eventSource is where an event is recorded: on stream, after op (-1 when
// the stream has run nothing before the record).
type eventSource struct{ stream, op int32 }

// eventSources finds each event's record in the steps.
func (p *Plan) eventSources() []eventSource {
	out := make([]eventSource, p.Events)
	for i := range out {
		out[i] = eventSource{-1, -1}
	}
	lastRun := make([]int32, len(p.Streams))
	for i := range lastRun {
		lastRun[i] = -1
	}
	for _, st := range p.Steps {
		if int(st.Stream) < 0 || int(st.Stream) >= len(lastRun) {
			continue
		}
		switch st.Kind {
		case Run:
			lastRun[st.Stream] = st.Op
		case Record:
			if st.Event >= 0 && int(st.Event) < len(out) {
				out[st.Event] = eventSource{st.Stream, lastRun[st.Stream]}
			}
		}
	}
	return out
}

func (p *Plan) op(id int32) *dag.Op {
	if p.Graph == nil || id < 0 || int(id) >= len(p.Graph.Ops) {
		return nil
	}
	return p.Graph.Ops[id]
}

func (p *Plan) opName(id int32) string {
	if op := p.op(id); op != nil {
		return op.Name
	}
	return fmt.Sprintf("#%d", id)
}

func (p *Plan) streamName(s int32) string {
	if s >= 0 && int(s) < len(p.Streams) {
		return p.Streams[s].Name
	}
	return fmt.Sprintf("stream#%d", s)
}

// formatDuration is d as dagrun writes durations everywhere.
func formatDuration(d time.Duration) string { return human.Duration(d) }

// BodyName says which of op's bodies body i is, for errors: "its body",
// "its then branch" or "its else branch".
func BodyName(op *dag.Op, i int) string {
	switch {
	case op.Kind.Info().Body == dag.Loop:
		return "its body"
	case i == 0:
		return "its then branch"
	}
	return "its else branch"
}

// describeControl writes a loop or branch as an instruction: its kind,
// name, flag and bound; its bodies follow it in the text (text.go).
func describeControl(w *bufio.Writer, op *dag.Op) {
	b := append(w.AvailableBuffer(), op.Kind.String()...)
	b = append(b, ' ')
	b = append(b, op.Name...)
	if c := op.Control; c != nil {
		b = append(b, " ("...)
		b = c.Cond.Append(b)
		b = append(b, " != 0"...)
		if c.Max > 0 {
			b = append(b, ", max "...)
			b = strconv.AppendInt(b, c.Max, 10)
		}
		b = append(b, ')')
	}
	w.Write(b)
}

// CopyDirection is the kind of copy stream for a copy op's direction.
func CopyDirection(op *dag.Op) StreamKind {
	src, dst := op.Access[0].Buf.Placement, op.Access[1].Buf.Placement
	switch {
	case src.Host() && dst == dag.Device:
		return CopyH2D
	case src == dag.Device && dst.Host():
		return CopyD2H
	}
	return CopyD2D
}
