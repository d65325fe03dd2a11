package memory

import "github.com/dagrun/dagrun/planner/plan"

// MinConcurrentPack is minConcurrentPack, for the external tests.
const MinConcurrentPack = minConcurrentPack

// Lives are the temporaries of a plan in its happens-before order, for
// the external tests: Temps in buffer ID order, and whether the plan
// orders every use of one before every use of another.
type Lives struct{ set *lifeSet }

// Collect returns the temporaries of p in its happens-before order.
func Collect(p *plan.Plan) Lives { return Lives{collect(p)} }

// Temps are the temporaries, by index.
func (l Lives) Temps() []plan.Temporary { return l.set.temps }

// Before reports whether the plan orders every use of temporary x before
// every use of temporary y.
func (l Lives) Before(x, y int32) bool { return l.set.before(x, y) }

// Peaks returns, for each memory of l, its peak (weight and members) as
// push-relabel finds it and as Dinic's algorithm does.
func (l Lives) Peaks() (got, want map[int]Peak) {
	byMemory := map[int][]int32{}
	for i, tmp := range l.set.temps {
		byMemory[tmp.Device] = append(byMemory[tmp.Device], int32(i))
	}
	got, want = map[int]Peak{}, map[int]Peak{}
	for dev, members := range byMemory {
		o := l.set.order(members)
		w, peak := peakOf(o)
		got[dev] = Peak{w, peak}
		w, peak = peakBy(o, (*flow).dinicSourceSide)
		want[dev] = Peak{w, peak}
	}
	return got, want
}

// Peak is a memory's peak: its bytes and its temporaries.
type Peak struct {
	Bytes int64
	Temps []int32
}
