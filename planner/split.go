package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/rewrite"
)

// splitPass cuts a pipeline's exposed ends, and all_reduces with the
// GEMMs that compute them, into row blocks (rewrite.Split). A graph with loops or branches is left as it is, as
// the fuse pass leaves it.
type splitPass struct{}

func (splitPass) Name() string { return "split" }
func (splitPass) Scope() Scope { return ScopeRewrite }

func (splitPass) Run(s *State) (string, error) {
	if len(s.Graph.Nested) > 0 {
		return "nothing split: the graph has loops or branches", nil
	}
	cost := s.Options.Cost
	if cost == nil {
		cost = perf.DefaultCost()
	}
	var summary string
	own := s.made == s.Graph // made by the fuse pass: no one else holds its ops
	s.Graph, s.Parts, summary = rewrite.Split(s.Graph, s.Parts, cost, rewrite.ChainConfig{SMs: s.Options.SMs, CollectiveSMs: s.Options.CollectiveSMs}, own)
	return summary, nil
}

// Splitting says whether New cuts a pipeline's exposed ends into row
// blocks (the split pass).
type Splitting uint8

const (
	// SplitAuto (the default) cuts the first GEMM and its upload, and the
	// last GEMM and its download, into row blocks where the cost model
	// says the transfer hidden is worth the further launches; and an
	// all_reduce with the GEMMs that compute its rows where the graph
	// asks (dag.SplitInto) or the cost model says the reduction hidden is
	// worth the launches and SMs it takes (Options.CollectiveSMs).
	SplitAuto Splitting = iota
	// SplitNone leaves every op whole.
	SplitNone

	numSplittings // keep last
)

var splittingNames = [numSplittings]string{SplitAuto: "auto", SplitNone: "none"}

func (s Splitting) String() string {
	if s < numSplittings {
		return splittingNames[s]
	}
	return fmt.Sprintf("Splitting(%d)", uint8(s))
}

// MarshalText writes s as UnmarshalText reads it.
func (s Splitting) MarshalText() ([]byte, error) {
	if s >= numSplittings {
		return nil, fmt.Errorf("unknown splitting %d", uint8(s))
	}
	return []byte(splittingNames[s]), nil
}

// UnmarshalText reads "auto" or "none": a Splitting is a flag's value
// through flag.TextVar, or a field of a JSON document.
func (s *Splitting) UnmarshalText(text []byte) error {
	for k, name := range splittingNames {
		if name == string(text) {
			*s = Splitting(k)
			return nil
		}
	}
	return fmt.Errorf("unknown splitting %q: use auto or none", text)
}
