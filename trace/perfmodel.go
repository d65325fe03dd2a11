package trace

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner/perf"
)

// PerfSamples turns the spans of a timed run of g (executor.Session.Spans,
// from CUPTI or timing events) into the samples a perf.PerfModel learns
// from: one per span, its op's duration. A span naming an op g lacks, or
// ending before it starts, is an error that names it: spans of another
// graph must not teach the model.
func PerfSamples(g *dag.Graph, spans []executor.Span) ([]perf.OpSample, error) {
	if g == nil {
		return nil, fmt.Errorf("perf samples: no graph")
	}
	out := make([]perf.OpSample, 0, len(spans))
	for i, sp := range spans {
		// Spans name ops by Index: those of loops' bodies too, one per iteration.
		op := g.OpAt(sp.Op)
		if op == nil {
			return nil, fmt.Errorf("perf samples: span %d names op %d, and the graph has %d ops", i, sp.Op, len(g.Ops)+len(g.Nested))
		}
		if sp.End < sp.Start {
			return nil, fmt.Errorf("perf samples: op %s ends (%v) before it starts (%v)", op.Name, sp.End, sp.Start)
		}
		out = append(out, perf.OpSample{Op: op, Duration: sp.End - sp.Start})
	}
	return out, nil
}
