package trace

import (
	"fmt"
	"time"
)

// MaxLoopSlices is how many slices an op of a loop's body gets in one run
// of a trace: its first MaxLoopSlices iterations (over all the passes of
// the loops around it). Its later ones are summed up in one LoopTail, so a
// loop of a million iterations leaves a trace of thousands of slices, not
// millions, and still says how many ran and how long they took.
const MaxLoopSlices = 1000

// MaxReadBytes is the largest trace file ReadChrome reads: reading one
// takes about six times its size in memory.
const MaxReadBytes = 256 << 20

// LoopTail sums up the slices of op Op (its Index, called Name) in run Run
// beyond its first MaxLoopSlices: how many there were, on which lane, when
// the first started and the last ended, and their total, shortest and
// longest durations. Holder and Parent place the op as Slice's do.
type LoopTail struct {
	Run, Op        int
	Holder, Parent int
	Name           string
	Lane           int
	Slices         int
	Start, End     time.Duration
	Busy           time.Duration
	Min, Max       time.Duration
}

// tail adds a slice of op past its first MaxLoopSlices in the run to the
// op's LoopTail.
func (b *builder) tail(opID, lane int, start, d time.Duration) {
	if b.tailOf == nil {
		b.tailOf = map[int]int{}
	}
	i, ok := b.tailOf[opID]
	if !ok {
		i = len(b.t.Tails)
		b.tailOf[opID] = i
		b.t.Tails = append(b.t.Tails, LoopTail{Run: b.run, Op: opID, Holder: int(b.holder[opID]), Parent: int(b.parent[opID]),
			Name: b.ops[opID].Name, Lane: lane, Start: start, End: start + d, Min: d, Max: d})
	}
	lt := &b.t.Tails[i]
	lt.Slices++
	lt.Busy += d
	lt.Start, lt.End = min(lt.Start, start), max(lt.End, start+d)
	lt.Min, lt.Max = min(lt.Min, d), max(lt.Max, d)
}

// chromeTail is a LoopTail in a trace file's otherData.
type chromeTail struct {
	Run     int     `json:"run,omitempty"`
	OpID    int     `json:"op_id"`
	Holder  int     `json:"holder_id"`
	Parent  int     `json:"parent_id"`
	Op      string  `json:"op"`
	Lane    int     `json:"lane"`
	Slices  int     `json:"slices"`
	StartUS float64 `json:"start_us"`
	EndUS   float64 `json:"end_us"`
	BusyUS  float64 `json:"busy_us"`
	MinUS   float64 `json:"min_us"`
	MaxUS   float64 `json:"max_us"`
}

func chromeTails(tails []LoopTail) []chromeTail {
	var out []chromeTail
	for _, lt := range tails {
		out = append(out, chromeTail{Run: lt.Run, OpID: lt.Op, Holder: lt.Holder, Parent: lt.Parent, Op: lt.Name, Lane: lt.Lane, Slices: lt.Slices,
			StartUS: micros(lt.Start), EndUS: micros(lt.End), BusyUS: micros(lt.Busy), MinUS: micros(lt.Min), MaxUS: micros(lt.Max)})
	}
	return out
}

// readTails reads a trace file's tails into t, its times through at.
func (t *Trace) readTails(tails []chromeTail, at func(event int, what string, us float64, negative bool) time.Duration) error {
	for _, c := range tails {
		if c.Slices < 1 || c.Lane < 0 { // the lane's range is checked once lanes are read
			return &ReadError{Event: -1, Msg: fmt.Sprintf("the loop tail of op %q has %d slices on lane %d", c.Op, c.Slices, c.Lane)}
		}
		lt := LoopTail{Run: c.Run, Op: c.OpID, Holder: c.Holder, Parent: c.Parent, Name: c.Op, Lane: c.Lane, Slices: c.Slices,
			Start: at(-1, "otherData loop tail start", c.StartUS, false), End: at(-1, "otherData loop tail end", c.EndUS, false),
			Busy: at(-1, "otherData loop tail busy", c.BusyUS, false),
			Min:  at(-1, "otherData loop tail min", c.MinUS, false), Max: at(-1, "otherData loop tail max", c.MaxUS, false)}
		t.Tails = append(t.Tails, lt)
	}
	return nil
}
