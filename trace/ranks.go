package trace

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dagrun/dagrun/planner"
)

// RankClock places the trace of one rank of a world on the world's clock.
// The ranks of a world leave their rendezvous at about the same moment
// (rank 0 lets them all in at once; in one process they share a clock), so
// traces of several processes, each timed on its own host's clock, align
// there: Offset is how long after this rank left the rendezvous the
// trace's time zero (its earliest slice) came, on the rank's own clock.
type RankClock struct {
	Rank, World int
	Offset      time.Duration
}

// chromeRank is a RankClock in a Chrome trace's otherData.
type chromeRank struct {
	Rank     int     `json:"rank"`
	World    int     `json:"world"`
	OffsetUS float64 `json:"offset_from_rendezvous_us"`
}

func (c *RankClock) chrome() *chromeRank {
	if c == nil {
		return nil
	}
	return &chromeRank{Rank: c.Rank, World: c.World, OffsetUS: micros(c.Offset)}
}

// pid is the Chrome process of the lane: one per device, and in a trace
// merged from ranks one per rank and device.
func (l Lane) pid() int {
	if l.Ranked {
		return (l.Rank+1)<<16 | (l.Device + 1)
	}
	return l.Device + 1
}

// MergeRanks merges the traces of ranks of one world into one timeline: a
// process per rank and device, each rank's slices shifted so that the
// ranks' rendezvous fall at one time, and the whole shifted so that the
// earliest slice starts at zero. Every trace needs its Rank (dagrun run
// writes it into the traces of ranks); ranks may be missing, but none may
// come twice. Figures add up the ranks' counts; the critical path is the
// longest rank's.
func MergeRanks(traces []*Trace) (*Trace, error) {
	if len(traces) == 0 {
		return nil, errors.New("trace: MergeRanks: no traces")
	}
	ordered := slices.Clone(traces)
	seen := map[int]bool{}
	world := -1
	for i, t := range ordered {
		switch {
		case t == nil:
			return nil, fmt.Errorf("trace: MergeRanks: trace %d is missing", i)
		case t.Rank == nil:
			return nil, fmt.Errorf("trace: MergeRanks: trace %d is not the trace of a rank (dagrun run of a world writes one per rank)", i)
		case seen[t.Rank.Rank]:
			return nil, fmt.Errorf("trace: MergeRanks: two traces of rank %d", t.Rank.Rank)
		case world >= 0 && t.Rank.World != world:
			return nil, fmt.Errorf("trace: MergeRanks: the traces come from worlds of %d and %d ranks", world, t.Rank.World)
		}
		seen[t.Rank.Rank] = true
		world = t.Rank.World
	}
	slices.SortFunc(ordered, func(a, b *Trace) int { return cmp.Compare(a.Rank.Rank, b.Rank.Rank) })

	// Each rank's time zero lies Offset after the common rendezvous; the
	// earliest slice of all is the merged zero.
	first := time.Duration(0)
	for i, t := range ordered {
		at := t.Rank.Offset
		if len(t.Slices) > 0 {
			at += slices.MinFunc(t.Slices, func(a, b Slice) int { return cmp.Compare(a.Start, b.Start) }).Start
		}
		if i == 0 || at < first {
			first = at
		}
	}
	m := &Trace{}
	for _, t := range ordered {
		lanes, slicesBefore := len(m.Lanes), len(m.Slices)
		for _, l := range t.Lanes {
			l.Ranked, l.Rank = true, t.Rank.Rank
			m.Lanes = append(m.Lanes, l)
		}
		shift := t.Rank.Offset - first
		for _, s := range t.Slices {
			s.Lane += lanes
			s.Start += shift
			m.Slices = append(m.Slices, s)
		}
		for _, f := range t.Flows {
			f.From += slicesBefore
			f.To += slicesBefore
			m.Flows = append(m.Flows, f)
		}
		f := &m.Figures
		f.Ops += t.Figures.Ops
		f.Streams += t.Figures.Streams
		f.CrossEdges += t.Figures.CrossEdges
		f.Waits += t.Figures.Waits
		f.EstMakespan = max(f.EstMakespan, t.Figures.EstMakespan)
		f.EstCriticalPath = max(f.EstCriticalPath, t.Figures.EstCriticalPath)
		f.CriticalPath = max(f.CriticalPath, t.Figures.CriticalPath)
	}
	return m, nil
}

// FromRankRuns is FromRuns for rank of a world of world ranks whose runs
// started since after the rank left its rendezvous: the trace's clock
// placed on the world's (RankClock), for MergeRanks.
func FromRankRuns(p *planner.Plan, runs []RunSpans, rank, world int, since time.Duration) *Trace {
	t := FromRuns(p, runs)
	t.Rank = &RankClock{Rank: rank, World: world, Offset: since + earliest(runs)}
	return t
}

// earliest is when the first of the runs' spans started, from the start of
// the runs: the time zero of their trace.
func earliest(runs []RunSpans) time.Duration {
	var first time.Duration
	found := false
	for _, r := range runs {
		for _, sp := range r.Spans {
			if at := r.Start + sp.Start; !found || at < first {
				first, found = at, true
			}
		}
	}
	return first
}
