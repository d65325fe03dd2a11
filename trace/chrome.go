package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// The Chrome Trace Event JSON that WriteChrome writes and ReadChrome reads.
// Devices are processes (pid = device + 1), streams are threads (tid =
// stream ID + 1); times are microseconds.
type (
	chromeFile struct {
		TraceEvents     []chromeEvent  `json:"traceEvents"`
		DisplayTimeUnit string         `json:"displayTimeUnit,omitempty"`
		OtherData       *chromeFigures `json:"otherData,omitempty"`
	}
	chromeEvent struct {
		Name string          `json:"name"`
		Cat  string          `json:"cat,omitempty"`
		Ph   string          `json:"ph"`
		Ts   float64         `json:"ts"`
		Dur  *float64        `json:"dur,omitempty"`
		Pid  int             `json:"pid"`
		Tid  int             `json:"tid"`
		ID   *int            `json:"id,omitempty"`
		Bp   string          `json:"bp,omitempty"`
		Args json.RawMessage `json:"args,omitempty"`
	}
	chromeFigures struct {
		// The trace of one rank of a world (ranks.go).
		Rank *chromeRank `json:"rank,omitempty"`

		Generator         string  `json:"generator"`
		SchemaVersion     int     `json:"schema_version"`
		Estimated         bool    `json:"estimated"`
		Ops               int     `json:"ops"`
		Streams           int     `json:"streams"`
		CrossEdges        int     `json:"cross_edges"`
		Waits             int     `json:"waits"`
		EstMakespanUS     float64 `json:"est_makespan_us"`
		EstCriticalPathUS float64 `json:"est_critical_path_us"`
		CriticalPathUS    float64 `json:"critical_path_us"`
		// How the run's ops were timed (a measured trace only): "cupti",
		// "events" or "timers", why, and the records the tracer dropped.
		Timing        string `json:"timing,omitempty"`
		TimingReason  string `json:"timing_reason,omitempty"`
		TimingDropped uint64 `json:"timing_dropped,omitempty"`
		// Fused ops the backend ran apart, and why (Figures.Unfused).
		Unfused []string `json:"unfused,omitempty"`
		// Replays traced as whole graphs, not op by op: each one's run,
		// start and duration, and how they were timed.
		WholeReplays bool                `json:"whole_replays,omitempty"`
		Replays      []chromeWholeReplay `json:"replays,omitempty"`
		ReplayTiming string              `json:"replay_timing,omitempty"`
		// Which runs were eager and which replays (Figures.Runs).
		Runs string `json:"runs,omitempty"`
		// The iterations of each loop, by run (Trace.Loops).
		Loops []chromeLoop `json:"loops,omitempty"`
		// The slices of loops' bodies beyond the first MaxLoopSlices of
		// each op in a run, summed up (Trace.Tails).
		LoopTails []chromeTail `json:"loop_tails,omitempty"`
	}
	chromeLoop struct {
		Run        int    `json:"run,omitempty"`
		OpID       int    `json:"op_id"`
		Op         string `json:"op"`
		Iterations int    `json:"iterations"`
		Timed      int    `json:"timed,omitempty"` // LoopRun.Timed
	}
	chromeWholeReplay struct {
		Run     int     `json:"run"`
		StartUS float64 `json:"start_us"`
		DurUS   float64 `json:"dur_us"`
	}
	threadArgs struct {
		Name       string `json:"name"`
		Stream     int    `json:"stream"`
		StreamName string `json:"stream_name"`
		Device     int    `json:"device"`
		Priority   int    `json:"priority"`
		Kind       string `json:"kind"`
	}
	sliceArgs struct {
		Op     string   `json:"op"`
		OpID   int      `json:"op_id"`
		Run    int      `json:"run,omitempty"`
		Kind   string   `json:"kind"`
		Bytes  int64    `json:"bytes"`
		Grid   string   `json:"grid,omitempty"`
		Block  string   `json:"block,omitempty"`
		Reads  []string `json:"reads,omitempty"`
		Writes []string `json:"writes,omitempty"`
		Parts  []string `json:"parts,omitempty"`    // fused ops: Slice.Parts
		Path   string   `json:"path,omitempty"`     // copies: Slice.Path
		GBps   float64  `json:"gb_per_s,omitempty"` // copies: achieved bandwidth
		Iter   *int     `json:"iter,omitempty"`     // ops in a loop's body: Slice.Iter
		// Ops of bodies: Slice.Holder and Slice.Parent.
		Holder *int `json:"holder_id,omitempty"`
		Parent *int `json:"parent_id,omitempty"`
	}
	flowArgs struct {
		Event int `json:"event"`
		OpID  int `json:"op_id"` // the op of the slice the event binds to
	}
)

const generator = "dagrun"

// SchemaVersion is the version of the trace files WriteChrome writes, in
// their otherData as schema_version: it grows when a field dagrun writes
// changes meaning or goes away. ReadChrome reads this version and older.
const SchemaVersion = 1

// flowCat is the category of the record -> wait flow events.
const flowCat = "wait"

// maxStacked is how many slices starting at one time ReadChrome looks
// through to bind a flow event.
const maxStacked = 8

func micros(d time.Duration) float64 { return float64(d) / 1e3 }

func fromMicros(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }

// MaxTraceMicros bounds every time a trace holds (about 116 days): sums of
// a few such times stay far inside time.Duration, so no loop over a range
// of time in the trace overflows.
const MaxTraceMicros = 1e13

// notATrace says what a trace must hold.
const notATrace = "not a trace: a trace is Chrome Trace Event JSON, an object with a traceEvents array (or the array alone) holding thread_name metadata and X slices, as dagrun run --trace writes"

// checkMicros converts a time in microseconds read from a trace, refusing
// one that is not a number of range, or negative unless negative.
func checkMicros(us float64, negative bool) (time.Duration, error) {
	switch {
	case math.IsNaN(us) || math.Abs(us) > MaxTraceMicros:
		return 0, fmt.Errorf("%g µs is out of range (at most %g)", us, float64(MaxTraceMicros))
	case us < 0 && !negative:
		return 0, fmt.Errorf("%g µs is negative", us)
	}
	return fromMicros(us), nil
}

func chromeReplays(rs []WholeReplay) []chromeWholeReplay {
	var out []chromeWholeReplay
	for _, r := range rs {
		out = append(out, chromeWholeReplay{Run: r.Run, StartUS: micros(r.Start), DurUS: micros(r.Dur)})
	}
	return out
}

// flowMargin is how far inside a slice its flow events sit, so that viewers
// bind them to that slice and not to its neighbour on the same stream.
func flowMargin(s Slice) time.Duration { return min(s.Dur/4, 100*time.Nanosecond) }

// WriteChrome writes t as Chrome Trace Event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: a process per device, a
// named thread per stream (sorted by priority, then kind), an "X" event per
// op with its details in args, and a flow ("s" at the end of the recording
// op, "f" with "bp":"e" at the start of the op after the wait) per event
// record and wait. The plan's figures are in "otherData".
func (t *Trace) WriteChrome(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ns","otherData":`)
	f := t.Figures
	fig, err := json.Marshal(chromeFigures{
		Rank:      t.Rank.chrome(),
		Generator: generator, SchemaVersion: SchemaVersion, Estimated: f.Estimated, Ops: f.Ops, Streams: f.Streams, CrossEdges: f.CrossEdges, Waits: f.Waits,
		EstMakespanUS: micros(f.EstMakespan), EstCriticalPathUS: micros(f.EstCriticalPath), CriticalPathUS: micros(f.CriticalPath),
		Timing: f.Timing, TimingReason: f.TimingReason, TimingDropped: f.TimingDropped, Unfused: f.Unfused, WholeReplays: f.WholeReplays,
		Replays: chromeReplays(f.Replays), ReplayTiming: f.ReplayTiming, Runs: f.Runs, Loops: chromeLoops(t.Loops),
		LoopTails: chromeTails(t.Tails),
	})
	if err != nil {
		return err
	}
	bw.Write(fig)
	bw.WriteString(",\n\"traceEvents\":[")
	n := 0
	emit := func(ev chromeEvent, args any) error {
		if args != nil {
			a, err := json.Marshal(args)
			if err != nil {
				return err
			}
			ev.Args = a
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
		bw.Write(line)
		n++
		return nil
	}
	type name struct {
		Name string `json:"name"`
	}
	type sortIndex struct {
		SortIndex int `json:"sort_index"`
	}
	seenDevice := map[int]bool{}
	for i, l := range t.Lanes {
		pid, tid := l.pid(), l.Stream+1
		if !seenDevice[pid] {
			seenDevice[pid] = true
			if err := emit(chromeEvent{Name: "process_name", Ph: "M", Pid: pid}, name{l.Process()}); err != nil {
				return err
			}
			if err := emit(chromeEvent{Name: "process_sort_index", Ph: "M", Pid: pid}, sortIndex{pid - 1}); err != nil {
				return err
			}
		}
		args := threadArgs{Name: l.Title(), Stream: l.Stream, StreamName: l.Name, Device: l.Device, Priority: int(l.Priority), Kind: l.Kind.String()}
		if err := emit(chromeEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid}, args); err != nil {
			return err
		}
		if err := emit(chromeEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: tid}, sortIndex{i}); err != nil {
			return err
		}
	}
	for _, s := range t.Slices {
		if s.Lane < 0 || s.Lane >= len(t.Lanes) {
			return fmt.Errorf("trace: slice of op %q is on lane %d of %d", s.Name, s.Lane, len(t.Lanes))
		}
		l := t.Lanes[s.Lane]
		dur := micros(s.Dur)
		ev := chromeEvent{Name: s.Name, Cat: s.Kind.String(), Ph: "X", Ts: micros(s.Start), Dur: &dur, Pid: l.pid(), Tid: l.Stream + 1}
		args := sliceArgs{Op: s.Name, OpID: s.Op, Run: s.Run, Kind: s.Kind.String(), Bytes: s.Bytes, Grid: dim(s.Grid), Block: dim(s.Block), Reads: s.Reads, Writes: s.Writes, Parts: s.Parts, Path: s.Path}
		if s.Loop {
			// Each iteration is a slice of its own: the name tells them apart.
			ev.Name = fmt.Sprintf("%s #%d", s.Name, s.Iter)
			iter := s.Iter
			args.Iter = &iter
		}
		if s.Loop || s.Holder != 0 || s.Parent != 0 {
			holder, parent := s.Holder, s.Parent
			args.Holder, args.Parent = &holder, &parent
		}
		if s.Path != "" {
			args.GBps = math.Round(s.GBps()*1000) / 1000
		}
		if err := emit(ev, args); err != nil {
			return err
		}
	}
	hostCounters := false
	for _, c := range t.Counters {
		if c.Memory < 0 && !hostCounters && !seenDevice[0] {
			hostCounters = true
			if err := emit(chromeEvent{Name: "process_name", Ph: "M", Pid: 0}, name{"host memory"}); err != nil {
				return err
			}
		}
		n := c.Bytes
		if err := emit(chromeEvent{Name: counterName(c.Memory), Ph: "C", Ts: micros(c.At), Pid: counterPid(c.Memory)}, counterArgs{&n}); err != nil {
			return err
		}
	}
	for i, fl := range t.Flows {
		if fl.From < 0 || fl.From >= len(t.Slices) || fl.To < 0 || fl.To >= len(t.Slices) {
			return fmt.Errorf("trace: flow of event e%d links slices %d and %d of %d", fl.Event, fl.From, fl.To, len(t.Slices))
		}
		from, to := t.Slices[fl.From], t.Slices[fl.To]
		id := i + 1
		fromLane, toLane := t.Lanes[from.Lane], t.Lanes[to.Lane]
		ename := fmt.Sprintf("e%d", fl.Event)
		start := chromeEvent{Name: ename, Cat: flowCat, Ph: "s", Ts: micros(from.End() - flowMargin(from)), Pid: fromLane.pid(), Tid: fromLane.Stream + 1, ID: &id}
		if err := emit(start, flowArgs{fl.Event, from.Op}); err != nil {
			return err
		}
		end := chromeEvent{Name: ename, Cat: flowCat, Ph: "f", Bp: "e", Ts: micros(to.Start + flowMargin(to)), Pid: toLane.pid(), Tid: toLane.Stream + 1, ID: &id}
		if err := emit(end, flowArgs{fl.Event, to.Op}); err != nil {
			return err
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// ReadError says what is wrong with a trace file ReadChrome reads.
type ReadError struct {
	Event int // index in traceEvents; -1 for the file as a whole
	Msg   string
}

func (e *ReadError) Error() string {
	if e.Event < 0 {
		return "trace: " + e.Msg
	}
	return fmt.Sprintf("trace: event %d: %s", e.Event, e.Msg)
}

// ReadChrome reads a trace that WriteChrome wrote (for example a run.json of
// `dagrun run --trace`). Lanes come from the thread_name metadata, slices
// from the X events, flows from matching s/f pairs bound to the slices that
// enclose them. It reads at most MaxReadBytes.
func ReadChrome(r io.Reader) (*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxReadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxReadBytes {
		return nil, &ReadError{Event: -1, Msg: fmt.Sprintf("the trace is larger than %d MiB, the most ReadChrome reads (a trace of dagrun keeps %d slices of each op of a loop per run; trace fewer runs or fewer ops)", MaxReadBytes>>20, MaxLoopSlices)}
	}
	var file chromeFile
	var probe struct {
		TraceEvents json.RawMessage `json:"traceEvents"`
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(trimmed, &file.TraceEvents)
	} else if err = json.Unmarshal(data, &probe); err == nil && probe.TraceEvents == nil {
		return nil, &ReadError{Event: -1, Msg: notATrace}
	} else if err == nil {
		err = json.Unmarshal(data, &file)
	}
	if err != nil {
		return nil, &ReadError{Event: -1, Msg: fmt.Sprintf("not Chrome Trace Event JSON: %v", err)}
	}
	if len(file.TraceEvents) == 0 {
		return nil, &ReadError{Event: -1, Msg: "the trace holds no events: " + notATrace}
	}
	t := &Trace{}
	var rerr error
	// at reads a time in microseconds, refusing one out of range.
	at := func(event int, what string, us float64, negative bool) time.Duration {
		d, err := checkMicros(us, negative)
		if err != nil && rerr == nil {
			rerr = &ReadError{Event: event, Msg: fmt.Sprintf("%s: %v", what, err)}
		}
		return d
	}
	if f := file.OtherData; f != nil && f.Generator == generator {
		if f.SchemaVersion > SchemaVersion {
			return nil, &ReadError{Event: -1, Msg: fmt.Sprintf("the trace has schema_version %d, newer than this dagrun reads (%d); use a newer dagrun", f.SchemaVersion, SchemaVersion)}
		}
		if f.Rank != nil {
			t.Rank = &RankClock{Rank: f.Rank.Rank, World: f.Rank.World, Offset: at(-1, "otherData.rank.offset_from_rendezvous_us", f.Rank.OffsetUS, true)}
		}
		t.Figures = Figures{Ops: f.Ops, Streams: f.Streams, CrossEdges: f.CrossEdges, Waits: f.Waits,
			EstMakespan: at(-1, "otherData.est_makespan_us", f.EstMakespanUS, false), EstCriticalPath: at(-1, "otherData.est_critical_path_us", f.EstCriticalPathUS, false),
			CriticalPath: at(-1, "otherData.critical_path_us", f.CriticalPathUS, false), Estimated: f.Estimated,
			Timing: f.Timing, TimingReason: f.TimingReason, TimingDropped: f.TimingDropped, Unfused: f.Unfused, WholeReplays: f.WholeReplays,
			ReplayTiming: f.ReplayTiming, Runs: f.Runs}
		for _, lr := range f.Loops {
			if lr.Iterations < 0 || lr.Timed < 0 || lr.Timed > lr.Iterations {
				return nil, &ReadError{Event: -1, Msg: fmt.Sprintf("loop %q ran %d iterations, %d of them timed", lr.Op, lr.Iterations, lr.Timed)}
			}
			t.Loops = append(t.Loops, LoopRun{Run: lr.Run, Op: lr.OpID, Name: lr.Op, Iterations: lr.Iterations, Timed: lr.Timed})
		}
		if err := t.readTails(f.LoopTails, at); err != nil {
			return nil, err
		}
		for _, r := range f.Replays {
			t.Figures.Replays = append(t.Figures.Replays, WholeReplay{Run: r.Run, Start: at(-1, "otherData replay start", r.StartUS, false), Dur: at(-1, "otherData replay dur", r.DurUS, false)})
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	type thread struct{ pid, tid int }
	laneOf := map[thread]int{}
	for i, ev := range file.TraceEvents {
		if ev.Ph != "M" || ev.Name != "thread_name" {
			continue
		}
		var a threadArgs
		if err := json.Unmarshal(ev.Args, &a); err != nil {
			return nil, &ReadError{Event: i, Msg: fmt.Sprintf("thread_name args: %v", err)}
		}
		kind, ok := streamKind(a.Kind)
		if !ok {
			return nil, &ReadError{Event: i, Msg: fmt.Sprintf("stream %q has unknown kind %q", a.StreamName, a.Kind)}
		}
		laneOf[thread{ev.Pid, ev.Tid}] = len(t.Lanes)
		t.Lanes = append(t.Lanes, Lane{Stream: a.Stream, Device: a.Device, Priority: dag.Priority(a.Priority), Kind: kind, Name: a.StreamName})
	}
	type flowEnd struct {
		event   int // index in traceEvents
		lane    int
		ts      time.Duration
		eventNo int
		op      int
	}
	starts, ends := map[int]flowEnd{}, map[int]flowEnd{}
	var flowIDs []int
	for i, ev := range file.TraceEvents {
		switch ev.Ph {
		case "X":
			lane, ok := laneOf[thread{ev.Pid, ev.Tid}]
			if !ok {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("slice %q is on pid %d tid %d, which no thread_name names", ev.Name, ev.Pid, ev.Tid)}
			}
			if ev.Dur == nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("slice %q has no dur", ev.Name)}
			}
			var a sliceArgs
			if err := json.Unmarshal(ev.Args, &a); err != nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("args of slice %q: %v", ev.Name, err)}
			}
			kind, ok := opKind(a.Kind)
			if !ok {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("slice %q has unknown op kind %q", ev.Name, a.Kind)}
			}
			grid, err := parseDim(a.Grid)
			if err != nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("grid of slice %q: %v", ev.Name, err)}
			}
			block, err := parseDim(a.Block)
			if err != nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("block of slice %q: %v", ev.Name, err)}
			}
			start, dur := at(i, "ts", ev.Ts, true), at(i, "dur", *ev.Dur, false)
			if rerr != nil {
				return nil, rerr
			}
			s := Slice{Op: a.OpID, Run: a.Run, Name: a.Op, Kind: kind, Lane: lane, Start: start, Dur: dur,
				Bytes: a.Bytes, Grid: grid, Block: block, Reads: a.Reads, Writes: a.Writes, Parts: a.Parts, Path: a.Path}
			if a.Holder != nil {
				s.Holder = *a.Holder
			}
			if a.Parent != nil {
				s.Parent = *a.Parent
			}
			if a.Iter != nil {
				s.Iter, s.Loop = *a.Iter, true
			}
			t.Slices = append(t.Slices, s)
		case "C":
			// Counter tracks: the memories' temporaries (counters.go);
			// counters of other names are someone else's, and ignored.
			m, ok := parseCounterName(ev.Name)
			if !ok {
				continue
			}
			var a counterArgs
			if err := json.Unmarshal(ev.Args, &a); err != nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("args of counter %q: %v", ev.Name, err)}
			}
			if a.Temporaries == nil || *a.Temporaries < 0 {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("counter %q needs temporaries, a byte count of at least 0", ev.Name)}
			}
			ts := at(i, "ts", ev.Ts, true)
			if rerr != nil {
				return nil, rerr
			}
			t.Counters = append(t.Counters, Counter{Memory: m, At: ts, Bytes: *a.Temporaries})
		case "s", "f":
			if ev.ID == nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("flow event %q has no id", ev.Name)}
			}
			lane, ok := laneOf[thread{ev.Pid, ev.Tid}]
			if !ok {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("flow event %q is on pid %d tid %d, which no thread_name names", ev.Name, ev.Pid, ev.Tid)}
			}
			var a flowArgs
			if err := json.Unmarshal(ev.Args, &a); err != nil {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("args of flow event %q: %v", ev.Name, err)}
			}
			ts := at(i, "ts", ev.Ts, true)
			if rerr != nil {
				return nil, rerr
			}
			end := flowEnd{event: i, lane: lane, ts: ts, eventNo: a.Event, op: a.OpID}
			side := starts
			if ev.Ph == "f" {
				side = ends
			}
			if _, dup := side[*ev.ID]; dup {
				return nil, &ReadError{Event: i, Msg: fmt.Sprintf("flow id %d has two %q events", *ev.ID, ev.Ph)}
			}
			side[*ev.ID] = end
			if ev.Ph == "s" {
				flowIDs = append(flowIDs, *ev.ID)
			}
		}
	}
	slices.SortStableFunc(t.Slices, func(a, b Slice) int { return compareSlices(&a, &b) })
	byLane := make([][]int, len(t.Lanes))
	for i, s := range t.Slices {
		byLane[s.Lane] = append(byLane[s.Lane], i)
	}
	enclosing := func(fe flowEnd) (int, error) {
		lane := byLane[fe.lane]
		// The last slice starting at or before ts.
		k, _ := slices.BinarySearchFunc(lane, fe.ts, func(i int, ts time.Duration) int {
			if t.Slices[i].Start <= ts {
				return -1
			}
			return 1
		})
		// Slices of one stream do not overlap, but zero-length ones may
		// share a time: look a few back for the op the event names.
		for j := k - 1; j >= 0 && j >= k-maxStacked; j-- {
			if s := t.Slices[lane[j]]; s.Op == fe.op && s.End() >= fe.ts {
				return lane[j], nil
			}
		}
		return 0, &ReadError{Event: fe.event, Msg: fmt.Sprintf("flow event lies in no slice of op %d on its thread", fe.op)}
	}
	for _, id := range flowIDs {
		s := starts[id]
		f, ok := ends[id]
		if !ok {
			return nil, &ReadError{Event: s.event, Msg: fmt.Sprintf("flow id %d starts but never finishes", id)}
		}
		from, err := enclosing(s)
		if err != nil {
			return nil, err
		}
		to, err := enclosing(f)
		if err != nil {
			return nil, err
		}
		t.Flows = append(t.Flows, Flow{Event: s.eventNo, From: from, To: to})
	}
	for id, f := range ends {
		if _, ok := starts[id]; !ok {
			return nil, &ReadError{Event: f.event, Msg: fmt.Sprintf("flow id %d finishes but never starts", id)}
		}
	}
	slices.SortStableFunc(t.Counters, func(a, b Counter) int { return cmp.Or(cmp.Compare(a.Memory, b.Memory), cmp.Compare(a.At, b.At)) })
	for _, lt := range t.Tails {
		if lt.Lane >= len(t.Lanes) {
			return nil, &ReadError{Event: -1, Msg: fmt.Sprintf("the loop tail of op %q is on lane %d of %d", lt.Name, lt.Lane, len(t.Lanes))}
		}
	}
	return t, nil
}

// dim writes a launch shape as 64x1x1, and the zero shape as "".
func dim(d dag.Dim3) string {
	if d == (dag.Dim3{}) {
		return ""
	}
	return d.String()
}

// parseDim reads what dim writes.
func parseDim(s string) (dag.Dim3, error) {
	var d dag.Dim3
	if s == "" {
		return d, nil
	}
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return d, fmt.Errorf("%q is not a shape like 64x1x1", s)
	}
	for i, p := range []*int{&d.X, &d.Y, &d.Z} {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return d, fmt.Errorf("%q is not a shape like 64x1x1", s)
		}
		*p = n
	}
	return d, nil
}

func streamKind(name string) (planner.StreamKind, bool) {
	for _, k := range planner.StreamKinds() {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func opKind(name string) (dag.OpKind, bool) {
	for _, k := range dag.OpKinds() {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}
