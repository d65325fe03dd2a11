package planner

import (
	"time"

	"github.com/dagrun/dagrun/dag"
)

// kindFacts are what the planner knows of an op kind. Every dag.OpKind has
// an entry (TestKindTableCoversEveryKind); a new kind adds its entry here
// and nowhere else in the planner.
type kindFacts struct {
	// cost is the kind's duration under DefaultCost when the op sets none.
	cost func(op *dag.Op) time.Duration
	// pool is the kind of stream the op runs on.
	pool func(op *dag.Op, sharedCopy bool) StreamKind
	// fills, when set, says whether the op keeps every multiprocessor of
	// its device busy (fills.go).
	fills func(op *dag.Op, sms int) bool
	// ordered kinds keep declaration order among the ops of their kind
	// whatever the placement strategy: collectives must be issued in the
	// same order on every rank.
	ordered bool
}

var kindTable = [...]kindFacts{
	dag.Alloc:  {cost: memOpCost, pool: computePool},
	dag.Free:   {cost: memOpCost, pool: computePool},
	dag.Copy:   {cost: copyCost, pool: copyPool},
	dag.Fill:   {cost: fillCost, pool: computePool},
	dag.Launch: {cost: launchCost, pool: computePool, fills: launchFills},
	dag.Host:   {cost: hostStepCost, pool: computePool},
	dag.Gemm:   {cost: gemmCost, pool: computePool, fills: gemmFills},

	dag.AllReduce:     {cost: collectiveCost, pool: collectivePool, ordered: true},
	dag.AllGather:     {cost: collectiveCost, pool: collectivePool, ordered: true},
	dag.ReduceScatter: {cost: collectiveCost, pool: collectivePool, ordered: true},
	dag.Broadcast:     {cost: collectiveCost, pool: collectivePool, ordered: true},
	dag.Send:          {cost: collectiveCost, pool: collectivePool, ordered: true},
	dag.Recv:          {cost: collectiveCost, pool: collectivePool, ordered: true},

	// A task's work is unknown: priced like a kernel over its views.
	dag.Task: {cost: fillCost, pool: computePool},
}

// factsOf returns kind k's entry; the zero kindFacts for a kind the table
// lacks (checkOp refuses such ops before anything asks).
func factsOf(k dag.OpKind) kindFacts {
	if int(k) < len(kindTable) {
		return kindTable[k]
	}
	return kindFacts{}
}

func computePool(*dag.Op, bool) StreamKind { return Compute }

// collectivePool: collectives get their own stream per device, so they
// overlap compute, and one stream keeps them in issue order.
func collectivePool(*dag.Op, bool) StreamKind { return Collective }

// copyPool puts a copy on the copy streams of its direction, or on the one
// shared copy stream.
func copyPool(op *dag.Op, shared bool) StreamKind {
	if shared {
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
