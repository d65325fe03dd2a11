package planner

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// New plans g onto streams: it assigns every op to a stream of its device,
// priority and kind, inserts the event records and waits that the
// dependencies across streams need (leaving out waits that earlier ones
// already imply), and lays out one global submission order. The same graph
// and options always give the same plan. Errors name the op or option at
// fault.
//
// It runs in O((V+E)·S) time for V ops, E dependencies and at most S
// streams in a pool, with a few words of memory per op and per wait.
func New(g *dag.Graph, opts Options) (*Plan, error) {
	if g == nil {
		return nil, errors.New("planner: no graph to plan")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// One pass checks and places the ops, as memory traffic over the ops
	// dominates for large graphs; after the first bad op it only checks.
	a := newAssigner(g, opts)
	var errs []error
	for i, op := range g.Ops {
		if errs = checkOp(errs, i, op); len(errs) == 0 {
			a.place(int32(i), op)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Plan{Graph: g, Streams: a.streams, OpStream: a.opStream}
	a.layOut(p)
	p.Stats = Stats{
		Ops:          len(g.Ops),
		Streams:      len(a.streams),
		CrossEdges:   a.crossEdges,
		Waits:        a.waitOps.len(),
		Makespan:     simulate(p, a.dur),
		CriticalPath: time.Duration(a.critical),
	}
	return p, nil
}

// checkOp appends to errs what makes op i impossible to place.
func checkOp(errs []error, i int, op *dag.Op) []error {
	if op == nil {
		return append(errs, &dag.Error{Op: fmt.Sprintf("#%d", i), Msg: "op is missing", Hint: "build graphs with dag.Builder"})
	}
	bad := func(field, hint, format string, args ...any) {
		errs = append(errs, &dag.Error{Op: op.Name, Field: field, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if op.Device < 0 {
		bad("device", "run it on device 0 or above", "device %d is negative", op.Device)
	}
	switch op.Kind {
	case dag.Copy:
		if len(op.Access) != 2 || op.Access[0].Buf == nil || op.Access[1].Buf == nil {
			bad("", "copy one view into another", "copy has %d accesses, not a source and a destination", len(op.Access))
		}
	case dag.Alloc, dag.Free, dag.Fill:
		if len(op.Access) == 0 || op.Access[0].Buf == nil {
			bad("", "name the buffer it works on", "%s has no buffer", op.Kind)
		}
	case dag.Launch, dag.Host, dag.Gemm:
	default:
		bad("", "", "unknown kind %d", op.Kind)
	}
	for _, d := range op.Deps {
		if d < 0 || int(d) >= i {
			bad("after", "build graphs with dag.Builder, which orders ops topologically",
				"depends on op %d, which does not come before it", d)
		}
	}
	return errs
}

// waitSlack is about what an event wait delays a stream on a current GPU.
const waitSlack = int64(2 * time.Microsecond)

// poolKey says which ops may share a stream: ops of one device, priority
// and stream kind.
type poolKey struct {
	device   int
	priority dag.Priority
	kind     StreamKind
}

// pool is the set of streams for one poolKey, created as needed up to limit.
type pool struct {
	key     poolKey
	limit   int
	streams []int32
}

// assigner places ops on streams in ID order by list scheduling under the
// cost model, and decides the waits each op needs on the way.
type assigner struct {
	ops  []*dag.Op
	opts Options

	pools  []pool
	poolOf map[poolKey]int32
	last   poolKey // the previous op's pool, to skip most map lookups
	lastID int32

	streams    []Stream
	streamPool []int32
	streamFree []int64 // estimated time the stream's last op finishes
	streamLast []int32 // the stream's last op, -1 while empty
	streamLen  []int32 // ops placed on the stream so far

	dur        []int64 // per op: estimated duration in ns
	finish     []int64 // per op: estimated finish in the schedule
	cpFinish   []int64 // per op: finish along the longest dependency chain
	critical   int64
	opStream   []int32
	opPos      []int32    // per op: 1-based position on its stream
	eventOf    []int32    // per op: its event, -1 when nothing waits for it
	waitOff    []int32    // the waits of op i are waitOps[waitOff[i]:waitOff[i+1]]
	waitOps    int32List  // the producer op each wait waits for
	opClock    []clockRef // per op: the copy of its stream's clock in force when it ran
	clocks     clocks
	scratch    []int32
	crossEdges int
}

func newAssigner(g *dag.Graph, opts Options) *assigner {
	n := len(g.Ops)
	a := &assigner{
		ops:      g.Ops,
		opts:     opts,
		poolOf:   map[poolKey]int32{},
		lastID:   -1,
		dur:      make([]int64, n),
		finish:   make([]int64, n),
		cpFinish: make([]int64, n),
		opStream: make([]int32, n),
		opPos:    make([]int32, n),
		eventOf:  make([]int32, n),
		waitOff:  make([]int32, n+1),
		opClock:  make([]clockRef, n),
	}
	shift := chunkShift(n)
	a.waitOps.shift = shift
	a.clocks.chunkLen = 1 << shift
	for i := range a.eventOf {
		a.eventOf[i] = -1
	}
	return a
}

// place assigns op i to a stream and decides its waits.
func (a *assigner) place(i int32, op *dag.Op) {
	d := int64(a.opts.Cost.Duration(op))
	if d < 0 {
		d = 0
	}
	a.dur[i] = d
	var est, cp int64
	for _, dep := range op.Deps {
		est = max(est, a.finish[dep])
		cp = max(cp, a.cpFinish[dep])
	}
	a.cpFinish[i] = cp + d
	a.critical = max(a.critical, cp+d)

	s := a.pick(a.poolFor(op), op, est)
	start := max(est, a.streamFree[s])
	a.finish[i] = start + d
	a.streamFree[s] = start + d
	a.streamLast[s] = i
	a.streamLen[s]++
	a.opStream[i] = s
	a.opPos[i] = a.streamLen[s]
	a.addWaits(i, op, s)
}

// poolFor returns the pool of op's device, priority and stream kind.
func (a *assigner) poolFor(op *dag.Op) int32 {
	key := poolKey{device: op.Device, priority: op.Priority, kind: a.kindOf(op)}
	if a.lastID >= 0 && key == a.last {
		return a.lastID
	}
	id, ok := a.poolOf[key]
	if !ok {
		// Compute work may spread over the stream budget. Copies of one
		// direction share that direction's copy engine and link bandwidth,
		// so a second stream of the same direction would mostly queue
		// behind the first while adding waits.
		limit := 1
		if key.kind == Compute {
			limit = a.opts.Streams
		}
		id = int32(len(a.pools))
		a.pools = append(a.pools, pool{key: key, limit: limit})
		a.poolOf[key] = id
	}
	a.last, a.lastID = key, id
	return id
}

// kindOf is the kind of stream op runs on.
func (a *assigner) kindOf(op *dag.Op) StreamKind {
	if op.Kind != dag.Copy {
		return Compute
	}
	if a.opts.SharedCopyStreams {
		return CopyAny
	}
	return copyDirection(op)
}

// copyDirection is the kind of copy stream for a copy op's direction.
func copyDirection(op *dag.Op) StreamKind {
	src, dst := op.Access[0].Buf.Placement, op.Access[1].Buf.Placement
	switch {
	case src.Host() && dst == dag.Device:
		return CopyH2D
	case src == dag.Device && dst.Host():
		return CopyD2H
	}
	return CopyD2D
}

// pick chooses op's stream in pool p, given its earliest start est.
func (a *assigner) pick(p int32, op *dag.Op, est int64) int32 {
	// Continue a chain: a stream whose last op is a dependency is idle by
	// est and is already ordered after that dependency. Among several,
	// follow the one that finishes last, which est waits for anyway.
	best := int32(-1)
	for _, dep := range op.Deps {
		s := a.opStream[dep]
		if a.streamPool[s] != p || a.streamLast[s] != dep {
			continue
		}
		if best < 0 || a.finish[dep] > a.finish[a.streamLast[best]] ||
			a.finish[dep] == a.finish[a.streamLast[best]] && s < best {
			best = s
		}
	}
	if best >= 0 {
		return best
	}

	// Otherwise an idle stream, needing the fewest waits and then leaving
	// the smallest gap; failing that a new stream; failing that the stream
	// that frees up first. A stream that needs no wait counts as idle if it
	// frees up within waitSlack of est: on a GPU a wait costs about that
	// much, and this keeps a chain on its stream past a short op such as
	// the free of a temporary.
	pl := &a.pools[p]
	idle, busy := int32(-1), int32(-1)
	var idleWaits, busyWaits int
	for _, s := range pl.streams {
		w := a.waitsNeeded(s, op)
		free := a.streamFree[s]
		if free <= est || w == 0 && free <= est+waitSlack {
			if idle < 0 || w < idleWaits || w == idleWaits && free > a.streamFree[idle] {
				idle, idleWaits = s, w
			}
			continue
		}
		if busy < 0 || free < a.streamFree[busy] || free == a.streamFree[busy] && w < busyWaits {
			busy, busyWaits = s, w
		}
	}
	switch {
	case idle >= 0:
		return idle
	case len(pl.streams) < pl.limit:
		return a.newStream(p)
	}
	return busy
}

// waitsNeeded counts the dependencies of op that stream s is not yet
// ordered after.
func (a *assigner) waitsNeeded(s int32, op *dag.Op) int {
	n := 0
	for _, dep := range op.Deps {
		if t := a.opStream[dep]; t != s && !a.clocks.covers(s, t, a.opPos[dep]) {
			n++
		}
	}
	return n
}

func (a *assigner) newStream(p int32) int32 {
	pl := &a.pools[p]
	id := int32(len(a.streams))
	k := pl.key
	name := fmt.Sprintf("dev%d.%s.%s", k.device, priorityName(k.priority), k.kind)
	if k.kind == Compute {
		name += fmt.Sprint(len(pl.streams))
	}
	a.streams = append(a.streams, Stream{ID: int(id), Device: k.device, Priority: k.priority, Kind: k.kind, Name: name})
	a.streamPool = append(a.streamPool, p)
	a.streamFree = append(a.streamFree, 0)
	a.streamLast = append(a.streamLast, -1)
	a.streamLen = append(a.streamLen, 0)
	a.clocks.addStream()
	pl.streams = append(pl.streams, id)
	return id
}

// priorityName spells a priority for stream names: high, normal, low, or
// prio7 for other values.
func priorityName(p dag.Priority) string {
	switch p {
	case dag.High, dag.Normal, dag.Low:
		return p.String()
	}
	return fmt.Sprintf("prio%d", int(p))
}
