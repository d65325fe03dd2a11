package planner

import (
	"bufio"
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
	// describe, when set, writes the op as an instruction of the text
	// plan; the kind and name otherwise.
	describe func(w *bufio.Writer, op *dag.Op)
}

var kindTable = [...]kindFacts{
	dag.Alloc:    {cost: memOpCost, pool: computePool, describe: describeLifetime},
	dag.Free:     {cost: memOpCost, pool: computePool, describe: describeLifetime},
	dag.Copy:     {cost: copyCost, pool: copyPool, describe: describeCopy},
	dag.Fill:     {cost: fillCost, pool: computePool, describe: describeFill},
	dag.Memset2D: {cost: fillCost, pool: computePool, describe: describeMemset2D},
	dag.Launch:   {cost: launchCost, pool: computePool, fills: launchFills, describe: describeLaunch},
	dag.Host:     {cost: hostStepCost, pool: computePool},
	dag.Gemm:     {cost: gemmCost, pool: computePool, fills: gemmFills},

	dag.AllReduce:     {cost: collectiveCost, pool: collectivePool},
	dag.AllGather:     {cost: collectiveCost, pool: collectivePool},
	dag.ReduceScatter: {cost: collectiveCost, pool: collectivePool},
	dag.Broadcast:     {cost: collectiveCost, pool: collectivePool},
	dag.Send:          {cost: collectiveCost, pool: collectivePool},
	dag.Recv:          {cost: collectiveCost, pool: collectivePool},

	// A task's work is unknown: priced like a kernel over its views.
	dag.Task: {cost: fillCost, pool: computePool},

	// A loop or branch costs one pass of its body: the makespan of the
	// body's plan (control.go). It runs where its flag is, and its body's
	// streams are its own: to the streams around it, it is one op.
	dag.While: {cost: passCost, pool: computePool, describe: describeControl},
	dag.If:    {cost: passCost, pool: computePool, describe: describeControl},
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
