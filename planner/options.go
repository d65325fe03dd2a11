package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Options tune New.
type Options struct {
	// Streams is the most compute streams per device and per priority
	// (0 means 4; 1..MaxStreams). It is not a total: copies get their own
	// streams on top (one per direction unless SharedCopyStreams), as do
	// collectives, so a plan with two priorities and uploads and downloads
	// can hold 2 x Streams + 2 streams.
	Streams           int
	SharedCopyStreams bool      // false (default): separate copy streams per direction (h2d, d2h, d2d)
	Cost              CostModel // nil means DefaultCost()
	Strategy          Strategy  // how ops are ordered for placement; the zero value is ListScheduling
	Mode              Mode      // what the estimate is for: an eager run (the zero value) or a graph replay
	Topology          Topology  // which devices copy directly; nil: unknown (topology.go)
	SMs               int       // multiprocessors per device, to tell which kernels fill it (fills.go); 0 means DefaultSMs
	// MemoryBudget bounds, by memory (a device ordinal, PinnedMemory or
	// PageableMemory), the bytes the plan may need there: its persistent
	// buffers and its temporaries' arena (MemoryUse.Bytes). New orders
	// temporaries to meet it, or fails with a *BudgetError (budget.go).
	// Memories it does not name are unbounded.
	MemoryBudget map[int]int64
	// PoolTemporaries says temporaries come from a stream-ordered pool at
	// run time (cuda's --temporaries pool), which counts an allocation
	// from its submission to its free's: each alloc is then placed just
	// before its first use and each free goes as soon as it can, so that
	// what the steps hold in submission order (MemoryUse.SubmittedPeak)
	// stays near the planned peak. With arenas the order costs nothing
	// and the default placement stands.
	PoolTemporaries bool
}

// MaxStreams is the most compute streams per device and priority a plan
// may use: the one limit that specs and the CLI check against.
const MaxStreams = 32

const defaultStreams = 4

// maxSMs bounds Options.SMs far above any GPU's multiprocessor count.
const maxSMs = 1 << 16

// Strategy names how the planner chooses the order in which it places ops
// on streams. Every strategy gives a correct plan; they differ in makespan.
type Strategy uint8

const (
	// ListScheduling (the default) places, among the ops whose
	// dependencies are placed, the one that can start earliest on its best
	// stream; ties go to the op with the longest cost path to the end of
	// the graph, then to the higher priority, then to the op declared
	// first. When that plan's estimate is more than 1% above a lower bound
	// (the largest of the critical path, each stream pool's work over its
	// streams, and the host's submission of every op), it also plans with
	// a lookahead (an op that can start within half the mean op cost of the
	// earliest start counts as starting then, so the longer path to the end
	// goes first) and in declaration order, and keeps the shortest
	// estimate, the earlier of these on a tie; it does so on graphs of up
	// to 16,384 ops, where the two more plans cost tens of milliseconds at
	// most (BENCHMARKS.md). Its plan is
	// therefore never more than 1% longer than DeclarationOrder's on those
	// graphs, and on any graph whose first plan meets the bound.
	ListScheduling Strategy = iota
	// DeclarationOrder places ops in the order they were declared, each on
	// the stream where it can start earliest (the planner's first strategy,
	// kept for comparison).
	DeclarationOrder
	// Best plans with all three orderings of ListScheduling whatever the
	// bound says and keeps the plan with the shortest estimate (the earlier
	// ordering on a tie); it is never longer than ListScheduling's.
	Best

	numStrategies // keep last
)

var strategyNames = [numStrategies]string{ListScheduling: "list", DeclarationOrder: "declared", Best: "best"}

func (s Strategy) String() string {
	if s < numStrategies {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Strategies lists every strategy, in order.
func Strategies() []Strategy { return []Strategy{ListScheduling, DeclarationOrder, Best} }

// ParseStrategy returns the strategy named s ("list", "declared", "best").
func ParseStrategy(s string) (Strategy, error) {
	for k, name := range strategyNames {
		if name == s {
			return Strategy(k), nil
		}
	}
	return 0, fmt.Errorf("unknown placement strategy %q: use list, declared or best", s)
}

// Mode is how a plan will run, which changes what its estimate charges.
type Mode uint8

const (
	// Eager: the host submits every step one after another, so an op starts
	// no sooner than the host has submitted it and the steps before it.
	Eager Mode = iota
	// Replay: a captured graph, submitted at once; only the device's costs
	// count.
	Replay

	numModes // keep last
)

var modeNames = [numModes]string{Eager: "eager", Replay: "replay"}

func (m Mode) String() string {
	if m < numModes {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Streams == 0 {
		o.Streams = defaultStreams
	}
	if o.Streams < 1 || o.Streams > MaxStreams {
		return o, &dag.Error{Field: "streams", Msg: fmt.Sprintf("stream budget %d is out of range", o.Streams),
			Hint: fmt.Sprintf("use 1 to %d compute streams per device and priority", MaxStreams)}
	}
	if o.Strategy >= numStrategies {
		return o, &dag.Error{Field: "strategy", Msg: fmt.Sprintf("unknown placement strategy %d", o.Strategy),
			Hint: "use planner.ListScheduling, DeclarationOrder or Best"}
	}
	if o.Mode >= numModes {
		return o, &dag.Error{Field: "mode", Msg: fmt.Sprintf("unknown run mode %d", o.Mode),
			Hint: "use planner.Eager or planner.Replay"}
	}
	if o.SMs == 0 {
		o.SMs = DefaultSMs
	}
	if o.SMs < 1 || o.SMs > maxSMs {
		return o, &dag.Error{Field: "sms", Msg: fmt.Sprintf("multiprocessor count %d is out of range", o.SMs),
			Hint: fmt.Sprintf("give the device's count, 1 to %d, or 0 for %d", maxSMs, DefaultSMs)}
	}
	for m, n := range o.MemoryBudget {
		if n <= 0 || m < PageableMemory {
			return o, &dag.Error{Field: "memory budget", Msg: fmt.Sprintf("memory budget of %d bytes for memory %d", n, m),
				Hint: "give each memory (a device ordinal, PinnedMemory or PageableMemory) a budget of at least 1 byte"}
		}
	}
	if o.Cost == nil {
		o.Cost = DefaultCost()
	}
	return o, nil
}
