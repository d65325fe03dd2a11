package planner

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// kindFacts are what the planner knows of an op kind. Every dag.OpKind has
// an entry (TestKindTableCoversEveryKind); a new kind adds its entry here,
// its cost in package perf and its text in package plan.
type kindFacts struct {
	// pool is the kind of stream the op runs on.
	pool func(op *dag.Op, sharedCopy bool) StreamKind
}

var kindTable = [...]kindFacts{
	dag.Alloc:    {pool: computePool},
	dag.Free:     {pool: computePool},
	dag.Copy:     {pool: copyPool},
	dag.Fill:     {pool: computePool},
	dag.Memset2D: {pool: computePool},
	dag.Launch:   {pool: computePool},
	dag.Host:     {pool: computePool},
	dag.Gemm:     {pool: computePool},

	dag.AllReduce:     {pool: collectivePool},
	dag.AllGather:     {pool: collectivePool},
	dag.ReduceScatter: {pool: collectivePool},
	dag.Broadcast:     {pool: collectivePool},
	dag.Send:          {pool: collectivePool},
	dag.Recv:          {pool: collectivePool},
	dag.Task:          {pool: computePool},

	// A loop or branch runs where its flag is, and its body's streams are
	// its own: to the streams around it, it is one op.
	dag.While: {pool: computePool},
	dag.If:    {pool: computePool},
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
	return plan.CopyDirection(op)
}
