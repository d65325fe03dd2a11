package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
)

// budgetReport is what meeting the memory budget cost the plan
// (plan.Budget), in dagrun run's summary.
type budgetReport struct {
	Orderings       int   `json:"orderings"`    // pairs of temporaries ordered
	Dependencies    int   `json:"dependencies"` // dependencies added between their uses
	EstMakespanNS   int64 `json:"est_makespan_ns"`
	UnconstrainedNS int64 `json:"unconstrained_est_makespan_ns"` // the plan's estimate without the budget
}

func newBudgetReport(p *planner.Plan) *budgetReport {
	b := p.Budget
	if b == nil {
		return nil
	}
	return &budgetReport{Orderings: b.Orderings, Dependencies: b.Dependencies,
		EstMakespanNS: int64(p.Stats.Makespan), UnconstrainedNS: int64(b.Unconstrained)}
}

// writeBudgetReport writes what the budget cost, if anything.
func writeBudgetReport(w io.Writer, b *budgetReport) {
	if b == nil {
		return
	}
	ratio := "no estimate"
	if b.UnconstrainedNS > 0 {
		ratio = fmt.Sprintf("%.2fx", float64(b.EstMakespanNS)/float64(b.UnconstrainedNS))
	}
	fmt.Fprintf(w, "memory budget: %s of temporaries ordered; estimated makespan %s against %s without it (%s)\n",
		human.Count(b.Orderings, "pair", "pairs"), short(b.EstMakespanNS), short(b.UnconstrainedNS), ratio)
}
