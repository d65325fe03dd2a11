package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dagrun/dagrun/internal/human"

	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/spec"
)

// writeComparison plans s with every placement strategy and writes each
// one's estimated makespan, for an eager run (what the plan is made for) and
// for a graph replay of the same plan, and its wait count, for
// `dagrun plan --compare`.
func writeComparison(w io.Writer, s *spec.Spec, l layout) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "strategy\teager estimate\treplay estimate\twaits\tstreams\tplaced by")
	for _, strategy := range planner.Strategies() {
		p, err := buildPlan(s, append(planOptions(s, l), planner.OrderBy(strategy))...)
		if err != nil {
			return err
		}
		replay := perf.Simulate(p, nil, planner.Replay)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", strategy, human.Duration(p.Stats.Makespan), human.Duration(replay.Makespan), p.Stats.Waits, p.Stats.Streams, p.Stats.Strategy)
	}
	return tw.Flush()
}
