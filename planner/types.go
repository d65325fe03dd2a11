package planner

import "github.com/dagrun/dagrun/planner/plan"

// The plan's types live in package plan, which the planner's passes and
// sub-packages share; these are their names here.
type (
	Plan       = plan.Plan
	Stream     = plan.Stream
	StreamKind = plan.StreamKind
	Step       = plan.Step
	StepKind   = plan.StepKind
	Stats      = plan.Stats
	Mode       = plan.Mode
	Strategy   = plan.Strategy
	Scope      = plan.Scope
	PassRecord = plan.PassRecord
	Topology   = plan.Topology
)

// The plan's constants, named here as in package plan: stream kinds, step
// kinds, modes, strategies and pass scopes.
const (
	Compute    = plan.Compute
	CopyH2D    = plan.CopyH2D
	CopyD2H    = plan.CopyD2H
	CopyD2D    = plan.CopyD2D
	CopyAny    = plan.CopyAny
	Collective = plan.Collective

	Run    = plan.Run
	Record = plan.Record
	Wait   = plan.Wait

	Eager  = plan.Eager
	Replay = plan.Replay

	ListScheduling   = plan.ListScheduling
	DeclarationOrder = plan.DeclarationOrder
	Best             = plan.Best

	ScopeRewrite = plan.ScopeRewrite
	ScopeOrder   = plan.ScopeOrder
	ScopePlace   = plan.ScopePlace
	ScopeEvents  = plan.ScopeEvents
	ScopeMemory  = plan.ScopeMemory
	ScopeLaunch  = plan.ScopeLaunch
	ScopeVerify  = plan.ScopeVerify
)

// StreamKinds lists every kind of stream, in order.
func StreamKinds() []StreamKind { return plan.StreamKinds() }

// Strategies lists every strategy, in order.
func Strategies() []Strategy { return plan.Strategies() }

// ParseStrategy returns the strategy named s ("list", "declared", "best").
func ParseStrategy(s string) (Strategy, error) { return plan.ParseStrategy(s) }
