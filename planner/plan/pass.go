package plan

import (
	"fmt"
	"time"
)

// Scope says what a pass may change. The pipeline runs passes in this
// order: rewrites, then the bodies of loops and branches, then order,
// place and events once per candidate plan (the Objective keeps one),
// then memory, then launch, then verify.
type Scope uint8

const (
	// ScopeRewrite passes change the graph: its ops, buffers and
	// dependencies (fusing a kernel into another, splitting one). They
	// come from planner.Rewrite and are the only passes that may.
	ScopeRewrite Scope = iota
	// ScopeOrder passes decide the order in which ops are placed.
	ScopeOrder
	// ScopePlace passes decide each op's stream, and price loops and
	// branches by their bodies' plans.
	ScopePlace
	// ScopeEvents passes decide the records, the waits and the one
	// submission order, and estimate the makespan.
	ScopeEvents
	// ScopeMemory passes lay out temporaries in arenas; to meet a memory
	// budget they may order temporaries' uses and plan again.
	ScopeMemory
	// ScopeLaunch passes decide how ops are launched (Plan.Early); they
	// change no step.
	ScopeLaunch
	// ScopeVerify passes change nothing: they check the plan.
	ScopeVerify

	numScopes // keep last
)

var scopeNames = [numScopes]string{ScopeRewrite: "rewrite", ScopeOrder: "order", ScopePlace: "place", ScopeEvents: "events", ScopeMemory: "memory", ScopeLaunch: "launch", ScopeVerify: "verify"}

func (s Scope) String() string {
	if s < numScopes {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// PassRecord is what one pass did in a New: Plan.Passes lists them in the
// order they ran.
type PassRecord struct {
	Name    string
	Scope   Scope
	Runs    int           // times it ran: once, or once per candidate plan for order, place and events
	Took    time.Duration // wall time of all its runs, with the passes it ran itself (memory replans to meet a budget)
	Summary string        // what it did, for people
}
