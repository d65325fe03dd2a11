package plan

import "fmt"

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
