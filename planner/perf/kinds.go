package perf

import (
	"time"

	"github.com/dagrun/dagrun/dag"
)

// kindCost is what the cost model knows of an op kind. Every dag.OpKind
// has an entry (TestKindCostsCoverEveryKind).
type kindCost struct {
	// cost is the kind's duration under DefaultCost when the op sets none.
	cost func(op *dag.Op) time.Duration
	// fills, when set, says whether the op keeps every multiprocessor of
	// its device busy (Fills).
	fills func(op *dag.Op, sms int) bool
	// body says the op costs one pass of its body (bodyCost), which
	// Duration asks for itself: bodyCost costs the body's ops through
	// this table.
	body bool
}

var kindCosts = [...]kindCost{
	dag.Alloc:    {cost: memOpCost},
	dag.Free:     {cost: memOpCost},
	dag.Copy:     {cost: copyCost},
	dag.Fill:     {cost: fillCost},
	dag.Memset2D: {cost: fillCost},
	dag.Launch:   {cost: launchCost, fills: launchFills},
	dag.Host:     {cost: hostStepCost},
	dag.Gemm:     {cost: gemmCost, fills: gemmFills},

	dag.AllReduce:     {cost: collectiveCost},
	dag.AllGather:     {cost: collectiveCost},
	dag.ReduceScatter: {cost: collectiveCost},
	dag.Broadcast:     {cost: collectiveCost},
	dag.Send:          {cost: collectiveCost},
	dag.Recv:          {cost: collectiveCost},

	// A task's work is unknown: priced like a kernel over its views.
	dag.Task: {cost: fillCost},

	// A loop or branch costs one pass of its body (bodyCost).
	dag.While: {body: true},
	dag.If:    {body: true},
}

// costOf returns kind k's entry; the zero kindCost for a kind the table
// lacks.
func costOf(k dag.OpKind) kindCost {
	if int(k) < len(kindCosts) {
		return kindCosts[k]
	}
	return kindCost{}
}

// bodyCost is a control op's duration under DefaultCost when the op sets
// none: the longest chain of dependencies through one pass of its body
// (for a branch, the longer one), no plan being at hand. The planner
// prices control ops from its bodies' plans instead (their makespan), and
// Simulate from a plan's Bodies.
func bodyCost(op *dag.Op) time.Duration {
	var d int64
	for _, body := range op.Bodies() {
		end := make([]int64, len(body.Ops))
		for i, o := range body.Ops {
			if o == nil {
				continue
			}
			var start int64
			for _, dep := range o.Deps {
				if int(dep) < i {
					start = max(start, end[dep])
				}
			}
			end[i] = dag.AddSat(start, NonNegative(defaultCost{}.Duration(o)))
			d = max(d, end[i])
		}
	}
	return time.Duration(d)
}
