package plan

import (
	"bufio"
	"fmt"
	"time"
)

// Budget is what meeting Options.MemoryBudget cost a plan: the orderings
// of temporaries it added and the estimated makespan of the plan without
// them.
type Budget struct {
	Orderings     int           // pairs of temporaries ordered to meet the budget
	Dependencies  int           // the dependencies between their uses added for them
	Unconstrained time.Duration // the estimated makespan of the plan without a budget
}

// writeBudget writes what the budget cost, for WriteText.
func (p *Plan) writeBudget(w *bufio.Writer) {
	b := p.Budget
	if b == nil {
		return
	}
	fmt.Fprintf(w, "memory budget       %d %s of temporaries ordered (%d dependencies added); estimated makespan %s against %s without the budget (%s)\n",
		b.Orderings, plural(b.Orderings, "pair", "pairs"), b.Dependencies, formatDuration(p.Stats.Makespan), formatDuration(b.Unconstrained), ratio(p.Stats.Makespan, b.Unconstrained))
}

// ratio is a against b as a factor: "1.18x".
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "no estimate"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
