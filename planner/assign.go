package planner

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
)

// New plans g onto streams under options (Streams, OrderBy, Optimize,
// ...): it orders the ops for placement by the strategy OrderBy gives
// (list scheduling by default, which on graphs of up to 16,384
// ops plans up to three orderings and keeps the shortest estimate where the
// first is over 1% above a lower bound: see ListScheduling), assigns each
// to a stream of its device, priority and kind, inserts the event records
// and waits that the dependencies across streams need (leaving out waits
// that earlier ones already imply), and lays out one global submission
// order. The bodies of loops and branches are planned first, each as a
// plan of its own (Plan.Bodies), and each control op is placed as one op
// that takes one pass of its body. The same graph and options always give
// the same plan. Errors name the op or option at fault.
//
// It runs in O((V+E)·S + V log V) time for V ops, E dependencies and at
// most S streams in a pool (times the number of pools, which is small, and
// the orderings planned, three at most), with a few words of memory per op
// and per wait.
func New(g *dag.Graph, options ...Option) (*Plan, error) {
	if g == nil {
		return nil, errors.New("planner: no graph to plan")
	}
	opts, err := optionsOf(options).withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkOps(g); err != nil {
		return nil, err
	}
	s := &State{Graph: g, Options: opts, declared: g}
	log, err := runPasses(s, opts.passes())
	if err != nil {
		return nil, err
	}
	s.Plan.Passes = log
	return s.Plan, nil
}

// checkOps says what makes g's ops impossible to place.
func checkOps(g *dag.Graph) error {
	var errs []error
	for i, op := range g.Ops {
		errs = checkOp(errs, i, op)
	}
	return errors.Join(errs...)
}

// planOne plans the checked graph g as one candidate: ops placed in the given
// ordering, with no other pass (for tests).
func planOne(g *dag.Graph, opts Options, by ordering, ordered func(dag.OpKind) bool) *Plan {
	s := &State{Graph: g, Options: opts, cand: candidate{by: by, streams: opts.Streams, ordered: ordered}}
	for _, p := range []Pass{orderPass{}, placePass{}, eventsPass{}} {
		p.Run(s) // they fail only on a graph that checkOps refuses
	}
	return s.Plan
}

// place places every op of g on a's streams in the order next gives.
func place(g *dag.Graph, opts Options, a *assigner, order placer) {
	// For temporaries from a pool (Options.PoolTemporaries), an op that
	// allocates one is held back until the first op that needs it is
	// placed, and placed just before it: free of dependencies, it would
	// otherwise go first, and the pool (which counts an allocation from
	// its submission) would hold every temporary at once.
	// It starts no sooner than that op could without it (floor), so that
	// in the submission order, which follows the starts, it also comes
	// after the frees that op waits for.
	var held []bool
	var release func(d int32, floor int64)
	release = func(d int32, floor int64) { // places held d, after the held ones it needs
		if held == nil || !held[d] {
			return
		}
		held[d] = false
		for _, dd := range g.Ops[d].Deps {
			release(dd, floor)
		}
		a.place(d, g.Ops[d], a.poolFor(g.Ops[d]), floor)
	}
	for {
		i, pool, ok := order.next()
		if !ok {
			break
		}
		op := g.Ops[i]
		if opts.PoolTemporaries && op.Kind.Info().Lifetime == dag.Allocates {
			if held == nil {
				held = make([]bool, len(g.Ops))
			}
			held[i] = true
			order.placed(i)
			continue
		}
		if held != nil {
			var floor int64
			for _, d := range op.Deps {
				if !held[d] {
					floor = max(floor, a.finishOf(d))
				}
			}
			for _, d := range op.Deps {
				release(d, floor)
			}
		}
		if pool < 0 {
			pool = a.poolFor(op)
		}
		a.place(i, op, pool, 0)
		order.placed(i)
	}
	for i := range held { // allocations nothing uses
		release(int32(i), 0)
	}
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
	if f := factsOf(op.Kind); f.pool == nil {
		bad("", "", "unknown kind %d", op.Kind)
	} else {
		switch want := op.Kind.Info().Accesses; {
		case want == 2 && (len(op.Access) != 2 || op.Access[0].Buf == nil || op.Access[1].Buf == nil):
			bad("", "copy one view into another", "%s has %d accesses, not a source and a destination", op.Kind, len(op.Access))
		case want == 1 && (len(op.Access) == 0 || op.Access[0].Buf == nil):
			bad("", "name the buffer it works on", "%s has no buffer", op.Kind)
		}
	}
	if op.Kind.Info().Body != dag.NoBody {
		errs = checkControl(errs, op) // control.go
	}
	for _, d := range op.Deps {
		if d < 0 || int(d) >= i {
			bad("after", "build graphs with dag.Builder, which orders ops topologically",
				"depends on op %d, which does not come before it", d)
		}
	}
	return errs
}

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

// assigner places ops on streams in the order a placer gives, each on the
// stream of its pool where it can start earliest under the cost model, and
// decides the waits each op needs on the way.
type assigner struct {
	ops  []*dag.Op
	opts Options
	// pairCost is what a record and wait pair costs: a stream that needs
	// fewer waits may be that much later and still be as good.
	pairCost int64

	pools  []pool
	poolOf map[poolKey]int32 // past 16 pools
	last   poolKey           // the previous op's pool, to skip most map lookups
	lastID int32

	streams    []Stream
	streamPool []int32
	streamFree []int64 // estimated time the stream's last op finishes
	streamLast []int32 // the stream's last op, -1 while empty
	streamLen  []int32 // ops placed on the stream so far
	// smFree is, per device, when the ops that fill it (perf.Fills) placed
	// so far are done: the next one starts no sooner, on any stream.
	smFree []int64

	costs      *costs
	dur        []int64 // costs.dur
	fill       []bool  // costs.fill
	bottom     []int64 // costs.bottom
	start      []int64 // per op: estimated start in the schedule
	critical   int64   // costs.critical
	placedN    int32
	rank       []int32 // per op: its place in the placement order
	opStream   []int32
	opPos      []int32    // per op: 1-based position on its stream
	eventOf    []int32    // per op: its event, -1 when nothing waits for it
	waitOff    []int32    // by rank: the waits of the op placed r-th are waitOps[waitOff[r]:waitOff[r+1]]
	waitOps    int32List  // the producer op each wait waits for
	opClock    []clockRef // per op: the copy of its stream's clock in force when it ran
	clocks     clocks
	scratch    []int32
	crossEdges int
	list       *listOrder // the list order of the candidate, or of a previous one
	order      []int32    // layOut's
}

// costs are what the candidate plans of one graph share: each op's
// estimated duration and whether it fills its device (perf.Fills), its
// bottom level (the longest cost path from its start to the end of the
// graph) and the critical path; and, as they are first asked for, each
// op's successors (for list scheduling) and the streams' names.
// State.planGraph makes them once per graph, not once per candidate.
type costs struct {
	dur      []int64
	fill     []bool
	bottom   []int64
	critical int64
	// The successors of op i are succ[succOff[i]:succOff[i+1]]; nil until
	// successors makes them.
	succOff, succ []int32
	names         []streamNameOf // see streamName
}

func costsOf(g *dag.Graph, opts Options) *costs {
	n := len(g.Ops)
	i64 := make([]int64, 2*n)
	c := &costs{dur: i64[:n:n], bottom: i64[n:], fill: make([]bool, n)}
	for i, op := range g.Ops {
		c.dur[i] = perf.NonNegative(opts.Cost.Duration(op))
		c.fill[i] = perf.Fills(op, opts.SMs)
	}
	// Bottom levels, from the last op back: IDs are a topological order.
	for i := n - 1; i >= 0; i-- {
		b := dag.AddSat(c.bottom[i], c.dur[i])
		c.bottom[i] = b
		c.critical = max(c.critical, b)
		for _, d := range g.Ops[i].Deps {
			c.bottom[d] = max(c.bottom[d], b)
		}
	}
	return c
}

// successors makes c.succOff and c.succ for ops, once.
func (c *costs) successors(ops []*dag.Op) {
	if c.succOff != nil {
		return
	}
	n := len(ops)
	off := make([]int32, 2*n+1)
	succOff, next := off[:n+1], off[n+1:] // next: where each op's next successor goes
	edges := 0
	for _, op := range ops {
		for _, d := range op.Deps {
			succOff[d+1]++
		}
		edges += len(op.Deps)
	}
	for i := range n {
		succOff[i+1] += succOff[i]
	}
	succ := make([]int32, edges)
	copy(next, succOff[:n])
	for i, op := range ops {
		for _, d := range op.Deps {
			succ[next[d]] = int32(i)
			next[d]++
		}
	}
	c.succOff, c.succ = succOff, succ
}

// newAssigner makes the assigner of a candidate plan of g. old, the
// assigner of the graph's previous candidate (nil for none), lends it
// what that candidate's plan does not keep, cleared: the candidates of a
// graph need the same room.
func newAssigner(g *dag.Graph, opts Options, c *costs, old *assigner) *assigner {
	n := len(g.Ops)
	ov := perf.OverheadsOf(opts.Cost)
	a := old
	if a == nil || a.costs != c {
		// The per-op lists of int32, in one allocation; room for 8 streams.
		i32 := make([]int32, 4*n+1+3*8)
		a = &assigner{
			start:      make([]int64, n),
			rank:       i32[0:n:n],
			opPos:      i32[n : 2*n : 2*n],
			eventOf:    i32[2*n : 3*n : 3*n],
			waitOff:    i32[3*n : 4*n+1 : 4*n+1],
			streamPool: i32[4*n+1 : 4*n+1 : 4*n+9],
			streamLast: i32[4*n+9 : 4*n+9 : 4*n+17],
			streamLen:  i32[4*n+17 : 4*n+17 : 4*n+25],
			streamFree: make([]int64, 0, 8),
			pools:      make([]pool, 0, 8),
			opClock:    make([]clockRef, n),
		}
		shift := chunkShift(n)
		a.waitOps.shift = shift
		a.clocks.chunkLen = 1 << max(shift, 8) // copies of clocks of a few streams, one per op that waits
	} else {
		clear(a.start)
		clear(a.rank)
		clear(a.opPos)
		clear(a.waitOff)
		clear(a.opClock)
		clear(a.poolOf)
		a.pools, a.streamPool, a.streamLast, a.streamLen = a.pools[:0], a.streamPool[:0], a.streamLast[:0], a.streamLen[:0]
		a.streamFree, a.smFree = a.streamFree[:0], a.smFree[:0]
		a.last, a.placedN, a.crossEdges = poolKey{}, 0, 0
		a.clocks.reset()
		a.waitOps.reset()
	}
	a.ops, a.opts, a.lastID = g.Ops, opts, -1
	a.pairCost = dag.AddSat(max(int64(ov.Record), 0), max(int64(ov.Wait), 0))
	a.costs, a.dur, a.fill, a.bottom, a.critical = c, c.dur, c.fill, c.bottom, c.critical
	// What the plan keeps is its own.
	a.opStream, a.streams = make([]int32, n), make([]Stream, 0, 8)
	for i := range a.eventOf {
		a.eventOf[i] = -1
	}
	return a
}

// place assigns op i to a stream of pool p, to start no sooner than floor
// nor its dependencies, and decides its waits.
func (a *assigner) place(i int32, op *dag.Op, p int32, floor int64) {
	est := floor
	for _, dep := range op.Deps {
		est = max(est, a.finishOf(dep))
	}
	filling := a.fill[i]
	if filling {
		// The same for every stream, so placement prefers one that needs
		// no new wait rather than a new stream that gains nothing.
		est = max(est, a.smFreeOf(op.Device))
	}
	s := a.pick(p, op, est)
	start := max(est, a.streamFree[s])
	end := dag.AddSat(start, a.dur[i])
	if filling {
		a.smFree[op.Device] = end
	}
	a.start[i] = start
	a.streamFree[s] = end
	a.streamLast[s] = i
	a.streamLen[s]++
	a.opStream[i] = s
	a.opPos[i] = a.streamLen[s]
	a.rank[i] = a.placedN
	a.placedN++
	a.addWaits(i, op, s)
}

// smFreeOf is when device d's multiprocessors are next free of filling ops.
func (a *assigner) smFreeOf(d int) int64 {
	if d >= len(a.smFree) {
		a.smFree = append(a.smFree, make([]int64, d+1-len(a.smFree))...)
	}
	return a.smFree[d]
}

// finishOf is when op i finishes in the schedule, once placed. Starts are
// kept rather than finishes: a start is exact where a saturated finish is
// not, and the submission order sorts by start.
func (a *assigner) finishOf(i int32) int64 { return dag.AddSat(a.start[i], a.dur[i]) }

// poolFor returns the pool of op's device, priority and stream kind.
func (a *assigner) poolFor(op *dag.Op) int32 {
	key := poolKey{device: op.Device, priority: op.Priority, kind: factsOf(op.Kind).pool(op, a.opts.SharedCopyStreams)}
	if a.lastID >= 0 && key == a.last {
		return a.lastID
	}
	// A plan has a few pools: a scan of them is quicker than hashing.
	id, ok := int32(-1), false
	if len(a.pools) <= 16 {
		for i := range a.pools {
			if a.pools[i].key == key {
				id, ok = int32(i), true
				break
			}
		}
	} else {
		id, ok = a.poolOf[key]
	}
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
		var streams []int32 // a previous candidate's pool's, when it lends them
		if len(a.pools) < cap(a.pools) {
			streams = a.pools[:id+1][id].streams[:0]
		}
		a.pools = append(a.pools, pool{key: key, limit: limit, streams: streams})
		if len(a.pools) > 16 {
			if a.poolOf == nil {
				a.poolOf = make(map[poolKey]int32, 2*len(a.pools))
				for i, pl := range a.pools {
					a.poolOf[pl.key] = int32(i)
				}
			}
			a.poolOf[key] = id
		}
	}
	a.last, a.lastID = key, id
	return id
}

// poolFree is the earliest time a stream of pool p is free: 0 while the
// pool may still open a stream.
func (a *assigner) poolFree(p int32) int64 {
	pl := &a.pools[p]
	if len(pl.streams) < pl.limit {
		return 0
	}
	free := int64(-1)
	for _, s := range pl.streams {
		if f := a.streamFree[s]; free < 0 || f < free {
			free = f
		}
	}
	return free
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
		if best < 0 || a.finishOf(dep) > a.finishOf(a.streamLast[best]) ||
			a.finishOf(dep) == a.finishOf(a.streamLast[best]) && s < best {
			best = s
		}
	}
	if best >= 0 {
		return best
	}

	// Otherwise the stream the objective prefers (preferStream: where the
	// op can start earliest, counting what its waits cost), then an
	// existing stream rather than a new one.
	pl := &a.pools[p]
	obj := a.opts.Objective
	var bc streamChoice
	for _, s := range pl.streams {
		w := a.waitsNeeded(s, op)
		free := a.streamFree[s]
		c := streamChoice{start: dag.AddSat(max(est, free), perf.SatMul(a.pairCost, int64(w))), waits: w, free: free}
		if best < 0 || obj.preferStream(c, bc) {
			best, bc = s, c
		}
	}
	if len(pl.streams) < pl.limit {
		// A new stream waits for every dependency.
		if obj.openStream(dag.AddSat(est, perf.SatMul(a.pairCost, int64(len(op.Deps)))), bc, best >= 0) {
			return a.newStream(p)
		}
	}
	return best
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
	name := a.costs.streamName(k, len(pl.streams))
	a.streams = append(a.streams, Stream{ID: int(id), Device: k.device, Priority: k.priority, Kind: k.kind, Name: name})
	a.streamPool = append(a.streamPool, p)
	a.streamFree = append(a.streamFree, 0)
	a.streamLast = append(a.streamLast, -1)
	a.streamLen = append(a.streamLen, 0)
	a.clocks.addStream()
	if cap(pl.streams) < pl.limit {
		pl.streams = make([]int32, 0, pl.limit)
	}
	pl.streams = append(pl.streams, id)
	return id
}

// streamName names the stream that opens as pool k's i-th:
// "dev0.normal.compute1", "dev0.high.h2d". Every candidate plan of a
// graph opens much the same streams: each name is made once.
func (c *costs) streamName(k poolKey, i int) string {
	if k.kind != Compute {
		i = 0
	}
	for _, n := range c.names {
		if n.k == k && n.i == i {
			return n.name
		}
	}
	var buf [64]byte
	b := append(buf[:0], "dev"...)
	b = strconv.AppendInt(b, int64(k.device), 10)
	b = append(append(append(append(b, '.'), priorityName(k.priority)...), '.'), k.kind.String()...)
	if k.kind == Compute {
		b = strconv.AppendInt(b, int64(i), 10)
	}
	name := string(b)
	c.names = append(c.names, streamNameOf{k, i, name})
	return name
}

// streamNameOf is a stream name streamName made.
type streamNameOf struct {
	k    poolKey
	i    int
	name string
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
