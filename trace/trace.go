package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Trace is a timeline of one run of a plan, or of the plan alone under a
// cost model: a lane per stream, a slice per op, a flow per event record and
// wait, and the plan's figures.
type Trace struct {
	Lanes  []Lane  // in display order: by device, priority (highest first), stream kind, stream ID
	Slices []Slice // by lane, then start, then op
	Flows  []Flow  // in the order of the plan's wait steps
	// Counters are the memories' counter tracks of temporaries (counters.go):
	// by memory, then time.
	Counters []Counter
	// Loops are the iterations each loop ran, by run, then the loop's
	// place in the graph (bodies.go); none in a trace without loops or
	// without slices of their bodies.
	Loops []LoopRun
	// Tails sum up the slices of each op of a loop's body beyond its first
	// MaxLoopSlices in a run (looptails.go): by run, then first such slice.
	Tails   []LoopTail
	Figures Figures
	// Rank places the trace of one rank of a world on the world's clock,
	// for MergeRanks (ranks.go); nil for a trace of no world.
	Rank *RankClock
}

// Lane is one stream of the plan.
type Lane struct {
	Stream   int // the plan's stream ID
	Device   int
	Priority dag.Priority
	Kind     planner.StreamKind
	Name     string // the stream's name, for example dev0.high.compute0
	// Ranked lanes belong to rank Rank of a trace merged from several
	// ranks (MergeRanks).
	Ranked bool
	Rank   int
}

// Title is the lane's name with its priority: "dev0.high.compute0 (priority high)".
func (l Lane) Title() string { return fmt.Sprintf("%s (priority %s)", l.Name, l.Priority) }

// Process is the name of the device the lane belongs to: "GPU 0", or
// "rank 1 GPU 1" in a trace merged from several ranks.
func (l Lane) Process() string {
	if l.Ranked {
		return fmt.Sprintf("rank %d %s", l.Rank, deviceName(l.Device))
	}
	return deviceName(l.Device)
}

// deviceName is how every picture and trace names device d.
func deviceName(d int) string { return fmt.Sprintf("GPU %d", d) }

// Copy reports whether the lane is a copy stream.
func (l Lane) Copy() bool { return l.Kind != planner.Compute }

// Slice is one op's time on its stream.
type Slice struct {
	Op  int // the op's Index in the plan's graph (its ID for a top-level op; see dag.Op.Index)
	Run int // the run's number in a trace of several runs (FromRuns); 0 otherwise
	// Iter is which iteration of its loop the slice of an op in a loop's
	// body is: its k-th slice in the run is iteration k, from 0. Loop says
	// the op is in a loop's body (at any depth); Iter is 0 otherwise.
	Iter int
	Loop bool
	// Holder and Parent place the op of a body: Holder is the Index of
	// the top-level loop or branch that runs it, Parent that of the loop
	// or branch whose body holds it directly (Holder too, unless bodies
	// nest). Both are 0 for a top-level op.
	Holder int
	Parent int
	Name   string
	Kind   dag.OpKind
	Lane   int           // index into Trace.Lanes
	Start  time.Duration // from the start of the trace (its earliest slice)
	Dur    time.Duration
	Bytes  int64    // bytes the op moves or touches (dag.Op.Bytes)
	Grid   dag.Dim3 // launches: the grid shape; zero otherwise
	Block  dag.Dim3 // launches: the block shape
	Reads  []string // views the op reads: buffer names, with [from:to] for part of a buffer
	Writes []string // views the op writes
	// Parts are the declared ops a fused op runs (planner.Plan.Parts: a
	// gemm and the launches that became its epilogue), in order; nil for
	// an op as declared.
	Parts []string
	// Path is where a copy goes: its ends (dev0, dev1, pinned, pageable)
	// and, between two devices, how (peer or via host): "dev1->dev0 peer".
	// Empty for other ops.
	Path string
}

// GBps is the slice's achieved bandwidth in GB/s (10^9 bytes per second):
// its bytes over its duration; 0 without either.
func (s Slice) GBps() float64 {
	if s.Dur <= 0 || s.Bytes <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Dur.Seconds() / 1e9
}

// End is when the slice ends.
func (s Slice) End() time.Duration { return s.Start + s.Dur }

// Flow is one event record and one wait for it: the arrow from the end of
// the op the event was recorded after to the start of the first op the
// waiting stream runs after the wait.
type Flow struct {
	Event    int
	From, To int // indices into Trace.Slices
}

// Figures are the plan's figures, and the critical path under the trace's
// own durations.
type Figures struct {
	Ops             int
	Streams         int
	CrossEdges      int
	Waits           int
	EstMakespan     time.Duration // the planner's estimate under its cost model
	EstCriticalPath time.Duration // the planner's critical-path bound under its cost model
	// CriticalPath is the longest dependency chain with each op taking its
	// slice's duration: no schedule of these durations ends sooner. In a
	// trace of several runs, the longest of the runs' critical paths.
	CriticalPath time.Duration
	// Estimated says the slices are cost-model estimates (FromPlan), not
	// measurements (FromRun).
	Estimated bool
	// Timing is how a measured trace's ops were timed ("cupti", "events",
	// "timers"), TimingReason why (the reason CUPTI was not used, say), and
	// TimingDropped the activity records the tracer dropped (their ops'
	// slices are missing). The caller sets them; WriteChrome keeps them.
	Timing        string
	TimingReason  string
	TimingDropped uint64
	// Unfused says which fused ops (a gemm with an epilogue) the backend
	// ran as the product and then the builtin kernels, and why: "fc1+gelu:
	// epilogue gelu apart: cuBLASLt has no algorithm ...". The caller sets
	// them (executor.Session.Unfused); WriteChrome keeps them.
	Unfused []string
	// WholeReplays says graph replays were traced as whole replays, not
	// op by op: Replays holds them, and there are no slices of their ops.
	// Either timing events could not time a replay's ops (each replay then
	// ran alone, timed by the host's clock), or whole replays were asked for
	// (dagrun run --trace-detail replays: on cuda, CUPTI's graph-level
	// records, on the device's clock).
	WholeReplays bool
	// Runs says which runs were eager and which replays of a graph the
	// runner captured automatically ("runs 1-3 eager, 4-1000 replayed
	// (captured automatically after 3 identical eager runs)"); empty when
	// the runs were all of one kind as asked.
	Runs string
	// Replays are the whole replays traced, in run order, and ReplayTiming
	// says how they were timed and on which clock.
	Replays      []WholeReplay
	ReplayTiming string
}

// WholeReplay is one graph replay traced as a whole: its run's number, its
// start on the clock common to the runs (RunSpans.Start's) and how long it
// took, as an executor.Runner reports it.
type WholeReplay = executor.WholeReplay

// Makespan is the time from the start of the first slice to the end of the last.
func (t *Trace) Makespan() time.Duration {
	var end time.Duration
	for _, s := range t.Slices {
		end = max(end, s.End())
	}
	for _, lt := range t.Tails {
		end = max(end, lt.End)
	}
	return end
}

// FromRun builds the trace of a run of p from the op times the executor
// measured (executor.Session.Spans with executor.WithTiming). Times are
// shifted so that the earliest span starts at zero. A span names its op by
// dag.Op.Index, so the ops of loops' and branches' bodies have spans too,
// one per iteration. Spans naming an op the plan's graph lacks are left
// out; a span whose stream the plan lacks is drawn on the op's planned
// stream, for an op of a body that of the top-level op that holds it. Building is linear in the size of the
// plan and the number of spans, plus sorting the slices.
func FromRun(p *planner.Plan, spans []executor.Span) *Trace {
	return FromRuns(p, []RunSpans{{Spans: spans}})
}

// RunSpans are the op times of one run of a plan, for FromRuns, as an
// executor.Runner reports them: the run's number (Slice.Run), when it
// started on a clock common to all the runs (the host's, from the first
// run's start), and its spans, measured from its own start.
type RunSpans = executor.RunSpans

// FromRuns builds the trace of several runs of p, as FromRun does for one:
// each run's slices are placed at the run's Start, and the whole trace is
// shifted so that the earliest span starts at zero. Flows link the record
// and wait of each run; the critical path is the longest run's.
func FromRuns(p *planner.Plan, runs []RunSpans) *Trace {
	n := 0
	for _, r := range runs {
		n += len(r.Spans)
	}
	b := newBuilder(p, n)
	if b == nil {
		return &Trace{}
	}
	origin := time.Duration(0)
	first := true
	for _, r := range runs {
		for _, sp := range r.Spans {
			if b.op(sp.Op) == nil {
				continue
			}
			if at := r.Start + sp.Start; first || at < origin {
				origin, first = at, false
			}
		}
	}
	for _, r := range runs {
		b.startRun(r.Run)
		for _, sp := range r.Spans {
			if b.op(sp.Op) == nil {
				continue
			}
			b.add(sp.Op, sp.Stream, r.Start+sp.Start-origin, max(sp.End-sp.Start, 0))
			if sp.Iterations > 0 {
				b.counted[sp.Op] = int32(min(sp.Iterations, math.MaxInt32))
			}
		}
		b.endRun()
	}
	return b.finish(false)
}

// FromPlan builds the trace the plan would leave if every op took the time
// cost gives it (perf.DefaultCost when nil), as perf.Simulate works it
// out for the kind of run the plan was estimated for (p.Stats.Mode): each
// stream runs its ops in order, an op after a wait starts no sooner than the
// recording op ends, and no op starts before it is submitted. With the
// planner's cost model this is the simulation the planner's makespan
// estimate comes from; device contention is not modelled. The trace's
// Figures.Estimated is true.
func FromPlan(p *planner.Plan, cost perf.CostModel) *Trace {
	if p == nil {
		return &Trace{}
	}
	b := newBuilder(p, len(p.OpStream))
	sched := perf.Simulate(p, cost, p.Stats.Mode)
	b.startRun(0)
	for _, st := range p.Steps {
		if st.Kind != planner.Run || st.Stream < 0 || int(st.Stream) >= len(p.Streams) || b.op(int(st.Op)) == nil {
			continue
		}
		b.add(int(st.Op), int(st.Stream), sched.Start[st.Op], sched.Duration[st.Op])
	}
	b.endRun()
	return b.finish(true)
}

// builder collects slices for one plan.
type builder struct {
	p         *planner.Plan
	ops       []*dag.Op // by Index: the top-level ops, then those of bodies
	top       int       // the top-level ops: ops[:top]
	holder    []int32   // by Index: the top-level op that runs the op (itself at top level)
	parent    []int32   // by Index: the control op whose body holds the op directly (itself at top level)
	inLoop    []bool    // by Index: the op is in a loop's body
	iters     []int32   // by Index: the op's slices so far in the run
	counted   []int32   // by Index: a loop's iterations in the run, as its span says (executor.Span.Iterations)
	runStart  int       // the run's first slice in t.Slices
	laneOf    []int     // by stream ID
	t         *Trace
	run       int     // the run the slices added now belong to
	sliceOf   []int32 // by op ID: the op's first slice of the run (in t.Slices before sorting), -1 for none
	durations []time.Duration
	runs      [][]int32   // each ended run's sliceOf
	names     []string    // backing array of the slices' Reads and Writes
	paths     []*string   // by op ID: the op's Slice.Path, made at its first slice
	tailOf    map[int]int // by op Index: its LoopTail of the run in t.Tails
	runTails  int         // the run's first LoopTail in t.Tails
	parts     [][]string  // by op ID: Slice.Parts; nil for a plan of the declared graph
}

// startRun starts the slices of run number run.
func (b *builder) startRun(run int) {
	b.run = run
	b.sliceOf = make([]int32, len(b.ops))
	for i := range b.sliceOf {
		b.sliceOf[i] = -1
	}
	clear(b.durations)
	clear(b.iters)
	clear(b.counted)
	b.runStart = len(b.t.Slices)
	b.tailOf, b.runTails = nil, len(b.t.Tails)
}

// endRun ends the run's slices: its critical path counts, and its flows
// are linked when the trace is finished.
func (b *builder) endRun() {
	if b.sliceOf == nil {
		return
	}
	b.controlDurations()
	b.loopRuns()
	b.t.Figures.CriticalPath = max(b.t.Figures.CriticalPath, criticalPath(b.ops[:b.top], b.durations[:b.top]))
	b.runs = append(b.runs, b.sliceOf)
	b.sliceOf = nil
}

// newBuilder starts the trace of p, with room for slices slices.
func newBuilder(p *planner.Plan, slices int) *builder {
	if p == nil {
		return nil
	}
	b := &builder{p: p, t: &Trace{Slices: make([]Slice, 0, slices)}}
	b.index(p.Graph)
	b.t.Lanes, b.laneOf = lanesOf(p.Streams)
	b.durations = make([]time.Duration, len(b.ops))
	for _, id := range p.Fused() {
		if b.parts == nil {
			b.parts = make([][]string, len(p.Graph.Ops))
		}
		for _, op := range p.PartsOf(id) {
			b.parts[id] = append(b.parts[id], op.Name)
		}
	}
	b.t.Figures = Figures{
		Ops: p.Stats.Ops, Streams: p.Stats.Streams, CrossEdges: p.Stats.CrossEdges, Waits: p.Stats.Waits,
		EstMakespan: p.Stats.Makespan, EstCriticalPath: p.Stats.CriticalPath,
	}
	return b
}

// lanesOf orders the streams for display and maps stream IDs to lanes.
func lanesOf(streams []planner.Stream) ([]Lane, []int) {
	lanes := make([]Lane, len(streams))
	for i, s := range streams {
		lanes[i] = Lane{Stream: i, Device: s.Device, Priority: s.Priority, Kind: s.Kind, Name: s.Name}
	}
	slices.SortStableFunc(lanes, func(a, b Lane) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(b.Priority, a.Priority),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Stream, b.Stream))
	})
	laneOf := make([]int, len(streams))
	for i, l := range lanes {
		laneOf[l.Stream] = i
	}
	return lanes, laneOf
}

func (b *builder) op(id int) *dag.Op {
	if id < 0 || id >= len(b.ops) {
		return nil
	}
	return b.ops[id]
}

// add records that op ran on stream from start for d; op must exist.
func (b *builder) add(opID, stream int, start, d time.Duration) {
	op := b.ops[opID]
	if stream < 0 || stream >= len(b.laneOf) {
		stream = -1
		if h := int(b.holder[opID]); h < len(b.p.OpStream) {
			stream = int(b.p.OpStream[h])
		}
		if stream < 0 || stream >= len(b.laneOf) {
			return
		}
	}
	if b.inLoop[opID] && b.iters[opID] >= MaxLoopSlices {
		b.iters[opID]++ // the loop's iterations count it (loopRuns)
		b.tail(opID, b.laneOf[stream], start, d)
		return
	}
	s := Slice{Op: opID, Run: b.run, Name: op.Name, Kind: op.Kind, Lane: b.laneOf[stream], Start: start, Dur: d, Bytes: op.Bytes(),
		Iter: int(b.iters[opID]), Loop: b.inLoop[opID]}
	if opID >= b.top {
		s.Holder, s.Parent = int(b.holder[opID]), int(b.parent[opID])
	}
	b.iters[opID]++
	if op.Kernel() != nil {
		s.Grid, s.Block = op.Launch.Grid, op.Launch.Block
	}
	s.Reads, s.Writes = b.views(op)
	s.Path = b.path(opID, op)
	if opID < len(b.parts) {
		s.Parts = b.parts[opID]
	}
	if b.sliceOf[opID] < 0 {
		b.sliceOf[opID] = int32(len(b.t.Slices))
		b.durations[opID] = d
	}
	b.t.Slices = append(b.t.Slices, s)
}

// views lists the views op reads and writes. The names of all slices share
// one growing backing array, so a slice costs no allocation of its own.
func (b *builder) views(op *dag.Op) (reads, writes []string) {
	var nr, nw int
	for _, a := range op.Access {
		if a.Buf != nil && a.Mode.Reads() {
			nr++
		}
		if a.Buf != nil && a.Mode.Writes() {
			nw++
		}
	}
	if nr+nw == 0 {
		return nil, nil
	}
	if cap(b.names)-len(b.names) < nr+nw {
		b.names = make([]string, 0, max(1024, nr+nw))
	}
	start := len(b.names)
	for _, a := range op.Access {
		if a.Buf != nil && a.Mode.Reads() {
			b.names = append(b.names, a.View.String())
		}
	}
	for _, a := range op.Access {
		if a.Buf != nil && a.Mode.Writes() {
			b.names = append(b.names, a.View.String())
		}
	}
	mid, end := start+nr, start+nr+nw
	if nr > 0 {
		reads = b.names[start:mid:mid]
	}
	if nw > 0 {
		writes = b.names[mid:end:end]
	}
	return reads, writes
}

// finish sorts the slices, links the flows and computes the critical path.
func (b *builder) finish(estimated bool) *Trace {
	t := b.t
	t.Figures.Estimated = estimated

	// Bucket the slices by lane (stable), then sort each lane's slices by
	// start unless they arrived in order, as backends report them.
	laneStart := make([]int, len(t.Lanes)+1)
	for _, s := range t.Slices {
		laneStart[s.Lane+1]++
	}
	for l := range t.Lanes {
		laneStart[l+1] += laneStart[l]
	}
	order := make([]int32, len(t.Slices))
	next := slices.Clone(laneStart[:len(t.Lanes)])
	for i, s := range t.Slices {
		order[next[s.Lane]] = int32(i)
		next[s.Lane]++
	}
	byStart := func(i, j int32) int {
		a, b := &t.Slices[i], &t.Slices[j]
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Op, b.Op), cmp.Compare(a.Dur, b.Dur), cmp.Compare(i, j))
	}
	for l := range t.Lanes {
		if lane := order[laneStart[l]:laneStart[l+1]]; !slices.IsSortedFunc(lane, byStart) {
			slices.SortFunc(lane, byStart)
		}
	}
	newIndex := make([]int32, len(order))
	sorted := make([]Slice, len(order))
	for n, i := range order {
		sorted[n] = t.Slices[i]
		newIndex[i] = int32(n)
	}
	t.Slices = sorted
	t.Counters = memoryCounters(b.ops, t.Slices) // counters.go
	recordedAfter := make([]int32, b.p.Events)
	for _, sliceOf := range b.runs {
		for op, i := range sliceOf {
			if i >= 0 {
				sliceOf[op] = newIndex[i]
			}
		}
		for i := range recordedAfter {
			recordedAfter[i] = -1
		}
		for _, st := range b.p.Steps {
			e := int(st.Event)
			if e < 0 || e >= len(recordedAfter) || b.op(int(st.Op)) == nil {
				continue
			}
			switch st.Kind {
			case planner.Record:
				recordedAfter[e] = st.Op
			case planner.Wait:
				if from := recordedAfter[e]; from >= 0 && sliceOf[from] >= 0 && sliceOf[st.Op] >= 0 {
					t.Flows = append(t.Flows, Flow{Event: e, From: int(sliceOf[from]), To: int(sliceOf[st.Op])})
				}
			}
		}
	}
	return t
}

// compareSlices is the order of Trace.Slices: by lane, start, op, duration.
func compareSlices(a, b *Slice) int {
	return cmp.Or(cmp.Compare(a.Lane, b.Lane), cmp.Compare(a.Start, b.Start), cmp.Compare(a.Op, b.Op), cmp.Compare(a.Dur, b.Dur))
}

// criticalPath is the longest chain of dependencies with op i taking dur[i].
// Deps point to smaller IDs, so one pass in ID order suffices.
func criticalPath(ops []*dag.Op, dur []time.Duration) time.Duration {
	finish := make([]time.Duration, len(ops))
	var longest time.Duration
	for i, op := range ops {
		var start time.Duration
		if op != nil {
			for _, d := range op.Deps {
				if d >= 0 && int(d) < i {
					start = max(start, finish[d])
				}
			}
		}
		finish[i] = start + dur[i]
		longest = max(longest, finish[i])
	}
	return longest
}

// path is op's Slice.Path, made once for every run's slices of it.
func (b *builder) path(opID int, op *dag.Op) string {
	if b.paths == nil {
		b.paths = make([]*string, len(b.ops))
	}
	if b.paths[opID] == nil {
		p := copyPath(b.p, op)
		b.paths[opID] = &p
	}
	return *b.paths[opID]
}

// copyPath is Slice.Path for op under plan p.
func copyPath(p *planner.Plan, op *dag.Op) string {
	if op.Kind != dag.Copy || len(op.Access) != 2 || op.Access[0].Buf == nil || op.Access[1].Buf == nil {
		return ""
	}
	end := func(b *dag.Buffer) string {
		switch b.Placement {
		case dag.Device:
			return fmt.Sprintf("dev%d", b.Device)
		case dag.Pinned:
			return "pinned"
		}
		return "pageable"
	}
	path := end(op.Access[0].Buf) + "->" + end(op.Access[1].Buf)
	if how := p.CopyPath(op); how != "" {
		path += " " + how
	}
	return path
}
