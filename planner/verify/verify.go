package verify

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// Kind is a way in which a plan can be wrong for its graph.
type Kind uint8

const (
	// Malformed: the plan or graph is not well formed (a step names a
	// stream, event or op that does not exist, an op ID is out of place, a
	// view lies outside its buffer).
	Malformed          Kind = iota + 1
	OpMissing               // an op never runs
	OpTwice                 // an op runs twice
	OpStreamMismatch        // OpStream disagrees with the stream an op runs on
	WrongDevice             // a kernel runs on a stream of another device
	EventRecordedTwice      // an event is recorded more than once
	EventNeverRecorded      // an event is never recorded
	WaitBeforeRecord        // a wait comes before its event's record in submission order
	// UnorderedConflict: two ops use overlapping bytes, at least one
	// writing, and nothing orders the later after the earlier.
	UnorderedConflict
	UnorderedDependency // an op is not ordered after one of its Deps
	UseBeforeAlloc      // a temporary is used (or freed) where it may not be allocated yet
	UseAfterFree        // a temporary is used where it may be freed already
	BadLifetime         // a temporary is not allocated and freed exactly once, or a persistent buffer is
	// ArenaOverlap: two temporaries share bytes of an arena and the plan
	// does not order every use of one before every use of the other, or a
	// temporary's place in its arena is out of bounds (verify_memory.go).
	ArenaOverlap
	// OutsideBody: an op of a loop's or branch's body may run before the
	// body's entry or after its end: its stream is not forked from the
	// body's entry stream before it, or not joined back into it after.
	OutsideBody
	// BadEarly: a launch marked early (Plan.Early) is not a kernel that
	// waits on the device, or does not follow such a kernel on its stream
	// with no wait between them (verify_early.go).
	BadEarly

	numKinds // keep last
)

var kindNames = [numKinds]string{
	Malformed: "malformed", OpMissing: "op missing", OpTwice: "op twice", OpStreamMismatch: "op stream",
	WrongDevice: "device", EventRecordedTwice: "event recorded twice", EventNeverRecorded: "event never recorded",
	WaitBeforeRecord: "wait before record", UnorderedConflict: "unordered conflict",
	UnorderedDependency: "unordered dependency", UseBeforeAlloc: "use before alloc", UseAfterFree: "use after free",
	BadLifetime: "lifetime", ArenaOverlap: "arena overlap", OutsideBody: "outside body", BadEarly: "early launch",
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error is one way in which a plan is wrong for its graph: test for
// it with errors.As and look at Kind.
type Error struct {
	Kind Kind
	Ops  []string // the names of the ops involved, earliest first
	Msg  string
}

func (e *Error) Error() string { return "plan: " + e.Kind.String() + ": " + e.Msg }

// Verify proves that p runs p.Graph correctly, independently of how the plan
// was made. It checks the plan's structure (every op runs exactly once, on
// the stream OpStream says; every event is recorded exactly once, before
// every wait on it in submission order), and then that stream order plus
// the record/wait edges order, in op ID order:
//   - every pair of conflicting ops: overlapping bytes of one buffer, at
//     least one of them writing; an Alloc or Free writes all of its buffer.
//     The conflicts come from the ops' accesses, not from their Deps;
//   - every op after each of its Deps (explicit After edges included);
//   - every use of a temporary buffer after its Alloc and before its Free;
//   - where p.Memory packs temporaries into arenas, every two temporaries
//     that share bytes: every use of one before every use of the other.
//
// The plans of the bodies of loops and branches (Plan.Bodies) are checked
// the same way, at every depth, and so that each body op happens after the
// body's entry (the start of its entry stream, Streams[0]) and before the
// end of the entry stream: the whole body runs inside its control op,
// which the graph around it orders as one op.
//
// Happens-before is computed with a vector clock per stream over the steps
// in submission order. The check takes time linear in the steps, the
// dependencies and the conflicts between each op and the last writer and
// readers since of the bytes it uses, times the number of streams for each
// record and wait; the arenas add a sort of the temporaries, a replay of
// their own, and a few checks for each after it (between neighbours over
// the same bytes, times the streams squared). The error, a *Error,
// names the ops at fault.
//
// A plan of a rewritten graph (Plan.Declared and Parts: a gemm and the
// launches fused into it, say) is checked as a plan of its graph, and
// then against the graph as declared (checkDeclared): every op of its
// graph uses the bytes of the declared ops it runs, and the plan, with
// each op's run taken as runs of its parts in order, orders every pair of
// declared ops that conflict.
func Verify(p *plan.Plan) error {
	if err := verify(p, false); err != nil {
		return err
	}
	return checkDeclared(p) // verify_declared.go
}

// verify is Verify of a plan, or of a body's plan (body): a body's
// temporaries live around its control op, which the graph around it
// checks, and its ops must stay between its fork and its join.
func verify(p *plan.Plan, body bool) error {
	v, err := newVerifier(p)
	if err != nil {
		return err
	}
	v.body = body
	if err := v.checkSteps(); err != nil {
		return err
	}
	if err := v.checkEarly(); err != nil { // verify_early.go
		return err
	}
	if !body {
		if err := v.collectLifetimes(); err != nil {
			return err
		}
	}
	// The arenas' check (verify_memory.go) needs none of the conflicts and
	// replays the steps itself: for many temporaries it runs meanwhile, on
	// another core where there is one.
	var arenas error
	// As many temporaries as the packer packs concurrently (memory's
	// minConcurrentPack): below that a goroutine costs more than it saves.
	const minConcurrentCheck = 512
	if m := p.Memory; m != nil && len(m.Temporaries) >= minConcurrentCheck {
		done := make(chan struct{})
		go func() {
			defer close(done)
			arenas = v.checkArenas()
		}()
		v.collectConflicts()
		<-done
	} else {
		v.collectConflicts()
		arenas = v.checkArenas()
	}
	if err := v.checkOrder(); err != nil {
		return err
	}
	if arenas != nil {
		return arenas
	}
	if v.overlapping != nil {
		return v.overlap(*v.overlapping)
	}
	return v.checkBodies() // verify_body.go
}

// Why an op must follow another.
const (
	needLifetime uint8 = iota
	needConflict
	needDep
	needArena // two temporaries share bytes (verify_memory.go)
)

// need says that op after must happen after op before.
type need struct {
	before, after int32
	why           uint8
	buf           int32 // the buffer of a conflict or lifetime, the first temporary of an arena's need
	other         int32 // the second temporary of an arena's need
}

type verifier struct {
	p         *plan.Plan
	body      bool // p plans a body (verify_body.go)
	ops       []*dag.Op
	streams   int
	stream    []int32     // the stream each op runs on, from its Run step
	lifetimes []need      // the needs of temporaries' lifetimes, in any order
	temps     []*tempLife // the temporaries' ops, where collectLifetimes ran
	oneBuffer bool        // every Alloc and Free names one buffer, where collectLifetimes ran
	// The conflicts: op i must follow conflictOps[k] for k in
	// conflictsOf[i]:conflictsOf[i+1], over buffer conflictBufs[k].
	conflictsOf  []int32
	conflictOps  []int32
	conflictBufs []int32
	// The arenas' places by buffer, the first use of each temporary, the
	// pairs of temporaries that must be ordered, with what checkPairs
	// needs to check them once replayArenas is done (the first and last
	// use of each temporary on each stream, each op's place among the
	// steps (at, which checkSteps keeps where the plan has arenas) and
	// among its stream's runs, and the clocks of some uses, by clockSlot),
	// and the first need of overlapping temporaries that the plan does not
	// meet (verify_memory.go).
	places          []*plan.Temporary
	firstUse        []int32
	arenaPairs      [][2]int32
	byFirst         []int32
	firstOn, lastOn []int32
	at, pos         []int32
	clockSlot       []int32
	clocks          []int32
	overlapping     *need
}

func malformed(format string, args ...any) *Error {
	return &Error{Kind: Malformed, Msg: fmt.Sprintf(format, args...)}
}

func newVerifier(p *plan.Plan) (*verifier, error) {
	if p == nil || p.Graph == nil {
		return nil, malformed("no plan or no graph")
	}
	g := p.Graph
	for i, b := range g.Buffers {
		if b == nil || b.ID != i {
			return nil, malformed("buffer %d of the graph is missing or has ID out of place", i)
		}
	}
	for i, op := range g.Ops {
		if op == nil || op.ID != i {
			return nil, malformed("op %d of the graph is missing or has ID out of place", i)
		}
		for _, a := range op.Access {
			if a.Buf == nil || a.Buf.ID < 0 || a.Buf.ID >= len(g.Buffers) || g.Buffers[a.Buf.ID] != a.Buf {
				return nil, &Error{Kind: Malformed, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q uses a buffer the graph does not hold", op.Name)}
			}
			if a.Offset < 0 || a.Size < 0 || a.End() > a.Buf.Size {
				return nil, &Error{Kind: Malformed, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q uses %s, outside the buffer's %d bytes", op.Name, a.View, a.Buf.Size)}
			}
		}
		if op.Kind.Info().Lifetime != dag.NoLifetime && len(op.Access) == 0 {
			return nil, &Error{Kind: Malformed, Ops: []string{op.Name}, Msg: fmt.Sprintf("%s op %q names no buffer", op.Kind, op.Name)}
		}
		for _, d := range op.Deps {
			if d < 0 || int(d) >= len(g.Ops) {
				return nil, &Error{Kind: Malformed, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q depends on op %d, which the graph does not hold", op.Name, d)}
			}
		}
	}
	for i, s := range p.Streams {
		if s.ID != i {
			return nil, malformed("stream %d (%s) has ID %d", i, s.Name, s.ID)
		}
	}
	if len(p.OpStream) != len(g.Ops) {
		return nil, malformed("OpStream has %d entries for %d ops", len(p.OpStream), len(g.Ops))
	}
	if p.Events < 0 {
		return nil, malformed("%d events", p.Events)
	}
	return &verifier{p: p, ops: g.Ops, streams: len(p.Streams)}, nil
}

func (v *verifier) opName(i int32) string { return v.ops[i].Name }

func (v *verifier) streamName(s int32) string {
	if name := v.p.Streams[s].Name; name != "" {
		return name
	}
	return fmt.Sprintf("stream %d", s)
}

// checkSteps checks that every step is well formed, every op runs once on
// the stream OpStream names, and every event is recorded once before any
// wait on it.
func (v *verifier) checkSteps() error {
	p := v.p
	v.stream = make([]int32, len(v.ops))
	for i := range v.stream {
		v.stream[i] = -1
	}
	recordedAt := make([]int, p.Events) // step index + 1 of the event's record
	if p.Memory != nil {
		v.at = make([]int32, len(v.ops)) // for the arenas' check (verify_memory.go)
	}
	for i, st := range p.Steps {
		if st.Stream < 0 || int(st.Stream) >= v.streams {
			return malformed("step %d (%s) names stream %d of %d", i, st.Kind, st.Stream, v.streams)
		}
		switch st.Kind {
		case plan.Run:
			if st.Op < 0 || int(st.Op) >= len(v.ops) {
				return malformed("step %d runs op %d of %d", i, st.Op, len(v.ops))
			}
			if prev := v.stream[st.Op]; prev >= 0 {
				return &Error{Kind: OpTwice, Ops: []string{v.opName(st.Op)},
					Msg: fmt.Sprintf("op %q runs twice, on %s and on %s", v.opName(st.Op), v.streamName(prev), v.streamName(st.Stream))}
			}
			v.stream[st.Op] = st.Stream
			if v.at != nil {
				v.at[st.Op] = int32(i)
			}
		case plan.Record, plan.Wait:
			if st.Event < 0 || int(st.Event) >= p.Events {
				return malformed("step %d (%s on %s) names event %d of %d", i, st.Kind, v.streamName(st.Stream), st.Event, p.Events)
			}
			at := &recordedAt[st.Event]
			switch {
			case st.Kind == plan.Record && *at != 0:
				first := p.Steps[*at-1]
				return &Error{Kind: EventRecordedTwice, Ops: v.stepOps(first, st),
					Msg: fmt.Sprintf("event %d is recorded twice: on %s (step %d) and on %s (step %d)", st.Event, v.streamName(first.Stream), *at-1, v.streamName(st.Stream), i)}
			case st.Kind == plan.Record:
				*at = i + 1
			case *at == 0:
				return &Error{Kind: WaitBeforeRecord, Ops: v.stepOps(st),
					Msg: fmt.Sprintf("%s waits on event %d at step %d, before the event is recorded", v.streamName(st.Stream), st.Event, i)}
			}
		default:
			return malformed("step %d has kind %d", i, st.Kind)
		}
	}
	for e, at := range recordedAt {
		if at == 0 {
			return &Error{Kind: EventNeverRecorded, Msg: fmt.Sprintf("event %d is never recorded", e)}
		}
	}
	for i, s := range v.stream {
		op := v.ops[i]
		switch {
		case s < 0:
			return &Error{Kind: OpMissing, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q never runs", op.Name)}
		case p.OpStream[i] != s:
			return &Error{Kind: OpStreamMismatch, Ops: []string{op.Name},
				Msg: fmt.Sprintf("op %q runs on %s but OpStream says stream %d", op.Name, v.streamName(s), p.OpStream[i])}
		case op.Kind.Info().Class != dag.CopyClass && op.Kind != dag.Host && p.Streams[s].Device != op.Device:
			return &Error{Kind: WrongDevice, Ops: []string{op.Name},
				Msg: fmt.Sprintf("kernel op %q of device %d runs on %s of device %d", op.Name, op.Device, v.streamName(s), p.Streams[s].Device)}
		}
	}
	return nil
}

// stepOps names the ops that record and wait steps say they follow or
// precede, where they name one.
func (v *verifier) stepOps(steps ...plan.Step) []string {
	var names []string
	for _, st := range steps {
		if st.Op >= 0 && int(st.Op) < len(v.ops) {
			names = append(names, v.opName(st.Op))
		}
	}
	return names
}

// tempLife is a temporary's Allocs, Frees and other users (once an op),
// in op ID order, as collectLifetimes finds them.
type tempLife struct {
	buf         int32
	alloc, free []int32
	users       []int32
}

// collectLifetimes needs every use of a temporary buffer to follow its one
// Alloc and precede its one Free. It keeps the temporaries' ops for the
// arenas' check (v.temps), and whether every Alloc and Free names one
// buffer (v.oneBuffer), which the arenas' check then relies on.
func (v *verifier) collectLifetimes() error {
	lives := make(map[*dag.Buffer]*tempLife)
	v.oneBuffer = true
	get := func(b *dag.Buffer) *tempLife {
		l := lives[b]
		if l == nil {
			l = &tempLife{buf: int32(b.ID)}
			lives[b] = l
			v.temps = append(v.temps, l)
		}
		return l
	}
	for i, op := range v.ops {
		id := int32(i)
		switch lt := op.Kind.Info().Lifetime; lt {
		case dag.Allocates, dag.Frees:
			b := op.Access[0].Buf
			if !b.Temporary {
				return &Error{Kind: BadLifetime, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q: %s of persistent buffer %s", op.Name, op.Kind, b.Name)}
			}
			v.oneBuffer = v.oneBuffer && len(op.Access) == 1
			if lt == dag.Allocates {
				get(b).alloc = append(get(b).alloc, id)
			} else {
				get(b).free = append(get(b).free, id)
			}
			continue
		}
		for j, a := range op.Access {
			if a.Buf.Temporary && !slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == a.Buf }) {
				get(a.Buf).users = append(get(a.Buf).users, id)
			}
		}
	}
	for _, b := range v.p.Graph.Buffers {
		l := lives[b]
		if l == nil {
			continue
		}
		for _, c := range []struct {
			what string
			ops  []int32
		}{{"allocated", l.alloc}, {"freed", l.free}} {
			if len(c.ops) != 1 {
				names := make([]string, len(c.ops))
				for i, o := range c.ops {
					names[i] = v.opName(o)
				}
				if len(names) == 0 && len(l.users) > 0 {
					names = []string{v.opName(l.users[0])}
				}
				return &Error{Kind: BadLifetime, Ops: names,
					Msg: fmt.Sprintf("temporary %s is %s %d times; it needs exactly one op that does it", b.Name, c.what, len(c.ops))}
			}
		}
		alloc, free := l.alloc[0], l.free[0]
		v.lifetimes = append(v.lifetimes, need{before: alloc, after: free, why: needLifetime, buf: int32(b.ID)})
		for _, u := range l.users {
			v.lifetimes = append(v.lifetimes,
				need{before: alloc, after: u, why: needLifetime, buf: int32(b.ID)},
				need{before: u, after: free, why: needLifetime, buf: int32(b.ID)})
		}
	}
	return nil
}

// segment is a byte range of a buffer, with the op that last wrote it and
// the ops that read it since, in op ID order.
type segment struct {
	start, end int64
	writer     int32 // -1 when none
	readers    []int32
}

// collectConflicts sweeps every buffer's accesses in op ID order and needs
// each op to follow the last writer of every byte it uses and, when it
// writes, every reader of that byte since. Ordering these is enough:
// happens-before is transitive, and every other conflicting pair is joined
// through them.
func (v *verifier) collectConflicts() {
	segs := make([][]segment, len(v.p.Graph.Buffers))
	seen := make([]int32, len(v.ops)) // seen[u] == op+1: the pair (u, op) is needed already
	deps := 0
	for _, op := range v.ops {
		deps += len(op.Deps)
	}
	// Conflicts between neighbours in a buffer's history are about as many
	// as the graph's dependencies.
	v.conflictsOf = make([]int32, len(v.ops)+1)
	v.conflictOps = make([]int32, 0, deps)
	v.conflictBufs = make([]int32, 0, deps)
	for i, op := range v.ops {
		id := int32(i)
		needFrom := func(u int32, buf int) {
			if u >= 0 && u != id && seen[u] != id+1 {
				seen[u] = id + 1
				v.conflictOps = append(v.conflictOps, u)
				v.conflictBufs = append(v.conflictBufs, int32(buf))
			}
		}
		for _, a := range accessesOf(op) {
			if a.Size == 0 {
				continue
			}
			b := a.Buf.ID
			s := segs[b]
			if s == nil {
				s = []segment{{start: 0, end: a.Buf.Size, writer: -1}}
			}
			s = cut(s, a.Offset)
			s = cut(s, a.End())
			lo := sort.Search(len(s), func(j int) bool { return s[j].start >= a.Offset })
			hi := lo
			for hi < len(s) && s[hi].end <= a.End() {
				hi++
			}
			for j := lo; j < hi; j++ {
				needFrom(s[j].writer, b)
				if a.Mode.Writes() {
					for _, r := range s[j].readers {
						needFrom(r, b)
					}
				}
			}
			if a.Mode.Writes() {
				s = slices.Replace(s, lo, hi, segment{start: a.Offset, end: a.End(), writer: id})
			} else {
				for j := lo; j < hi; j++ {
					if n := len(s[j].readers); n == 0 || s[j].readers[n-1] != id {
						s[j].readers = append(s[j].readers, id)
					}
				}
			}
			segs[b] = s
		}
		v.conflictsOf[i+1] = int32(len(v.conflictOps))
	}
}

// accessesOf is how op uses memory: an Alloc or Free writes all of its
// buffer, whatever its access says.
func accessesOf(op *dag.Op) []dag.Access {
	if op.Kind.Info().Lifetime != dag.NoLifetime {
		return []dag.Access{{View: op.Access[0].Buf.All(), Mode: dag.Write}}
	}
	return op.Access
}

// cut makes a segment of s start at off, when off is inside s.
func cut(s []segment, off int64) []segment {
	j := sort.Search(len(s), func(j int) bool { return s[j].end > off })
	if j == len(s) || s[j].start == off {
		return s
	}
	right := s[j]
	right.start = off
	right.readers = slices.Clone(s[j].readers)
	s[j].end = off
	return slices.Insert(s, j+1, right)
}

// checkOrder replays the steps in submission order with a vector clock per
// stream and checks every need when its later op runs.
func (v *verifier) checkOrder() error {
	p := v.p
	// The lifetime needs of each op, bucketed by the later op.
	first := make([]int32, len(v.ops)+1)
	for _, n := range v.lifetimes {
		first[n.after+1]++
	}
	for i := range v.ops {
		first[i+1] += first[i]
	}
	lifetimes := make([]need, len(v.lifetimes))
	next := slices.Clone(first[:len(v.ops)])
	for _, n := range v.lifetimes {
		lifetimes[next[n.after]] = n
		next[n.after]++
	}

	clocks := newStreamClocks(v.streams, p.Events)
	pos := make([]int32, len(v.ops)) // the op's place among its stream's runs, from 1
	fork := newForks(v)              // verify_body.go
	for _, st := range p.Steps {
		s := int(st.Stream)
		fork.step(st)
		mine := clocks.step(st)
		switch st.Kind {
		case plan.Run:
			id := st.Op
			if err := fork.check(id); err != nil {
				return err
			}
			// after says whether op u happens before this run. The checks
			// go from the clearest reason to the most general: lifetimes,
			// conflicts, then Deps.
			after := func(u int32) bool {
				return pos[u] != 0 && (int(v.stream[u]) == s || mine[v.stream[u]] >= pos[u])
			}
			for _, n := range lifetimes[first[id]:first[id+1]] {
				if !after(n.before) {
					return v.unordered(n, pos[n.before] == 0)
				}
			}
			for k := v.conflictsOf[id]; k < v.conflictsOf[id+1]; k++ {
				if u := v.conflictOps[k]; !after(u) {
					return v.unordered(need{before: u, after: id, why: needConflict, buf: v.conflictBufs[k]}, pos[u] == 0)
				}
			}
			for _, u := range v.ops[id].Deps {
				if !after(u) {
					return v.unordered(need{before: u, after: id, why: needDep, buf: -1}, pos[u] == 0)
				}
			}
			mine[s]++
			pos[id] = mine[s]
		}
	}
	return fork.joined(clocks.clock)
}

// streamClocks replays a plan's records and waits as a vector clock per
// stream: clock[s*ns+t] says that stream s is after the first that many
// runs of stream t, and events[e*ns+t] is event e's clock when recorded
// (all zeros, ordering nothing, until it is).
type streamClocks struct {
	ns            int
	clock, events []int32
}

func newStreamClocks(streams, events int) streamClocks {
	return streamClocks{ns: streams, clock: make([]int32, streams*streams), events: make([]int32, events*streams)}
}

// step applies st if it records or waits, and returns the clock of st's
// stream: a run reads it, then counts itself (mine[stream]++).
func (c streamClocks) step(st plan.Step) []int32 {
	ns, s, e := c.ns, int(st.Stream), int(st.Event)
	mine := c.clock[s*ns : (s+1)*ns]
	switch st.Kind {
	case plan.Record:
		copy(c.events[e*ns:], mine)
	case plan.Wait:
		for t, at := range c.events[e*ns : (e+1)*ns] {
			mine[t] = max(mine[t], at)
		}
	}
	return mine
}

// unordered describes need n, which the plan does not meet; late says that
// the earlier op is submitted after the later one.
func (v *verifier) unordered(n need, late bool) error {
	u, w := n.before, n.after
	where := func(o int32) string { return fmt.Sprintf("op %q (%s)", v.opName(o), v.streamName(v.stream[o])) }
	var why string
	switch {
	case late && v.stream[u] == v.stream[w]:
		why = "but runs after it on the same stream"
	case late:
		why = "but is submitted after it, so no wait can order them"
	default:
		why = "with no wait between them"
	}
	names := []string{v.opName(u), v.opName(w)}
	switch n.why {
	case needLifetime:
		b := v.p.Graph.Buffers[n.buf]
		kind := UseAfterFree
		if v.ops[u].Kind.Info().Lifetime == dag.Allocates {
			kind = UseBeforeAlloc
		}
		return &Error{Kind: kind, Ops: names,
			Msg: fmt.Sprintf("%s %s temporary %s and %s %s it, %s", where(u), useVerb(v.ops[u], b), b.Name, where(w), useVerb(v.ops[w], b), why)}
	case needConflict:
		return &Error{Kind: UnorderedConflict, Ops: names,
			Msg: fmt.Sprintf("%s %s, %s", where(u), v.conflict(u, w, n.buf, where(w)), why)}
	default:
		return &Error{Kind: UnorderedDependency, Ops: names,
			Msg: fmt.Sprintf("%s depends on %s, %s", where(w), where(u), why)}
	}
}

// conflict says how ops u and w, the later one described by later, use
// overlapping bytes of buffer buf: "writes x[0:64) and op "b" (s) reads it".
func (v *verifier) conflict(u, w int32, buf int32, later string) string {
	for _, a := range accessesOf(v.ops[u]) {
		for _, b := range accessesOf(v.ops[w]) {
			if a.Buf.ID != int(buf) || !a.Overlaps(b.View) || !a.Mode.Writes() && !b.Mode.Writes() {
				continue
			}
			lo, hi := max(a.Offset, b.Offset), min(a.End(), b.End())
			return fmt.Sprintf("%s %s[%d:%d) and %s %s it", modeVerb(v.ops[u], a.Mode), a.Buf.Name, lo, hi, later, modeVerb(v.ops[w], b.Mode))
		}
	}
	return fmt.Sprintf("uses %s and %s uses it", v.p.Graph.Buffers[buf].Name, later)
}

func modeVerb(op *dag.Op, m dag.Mode) string {
	switch {
	case op.Kind.Info().Lifetime == dag.Allocates:
		return "allocates"
	case op.Kind.Info().Lifetime == dag.Frees:
		return "frees"
	case m == dag.ReadWrite:
		return "reads and writes"
	case m.Writes():
		return "writes"
	}
	return "reads"
}

// useVerb says how op uses temporary b.
func useVerb(op *dag.Op, b *dag.Buffer) string {
	var modes dag.Mode
	for _, a := range accessesOf(op) {
		if a.Buf == b {
			modes |= a.Mode
		}
	}
	return modeVerb(op, modes)
}
