package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/planner/rewrite"
)

// Fusion says whether New fuses ops before placing them (the fuse pass).
type Fusion uint8

const (
	// FuseAuto (the default) fuses a gemm with the bias_add, gelu and
	// relu launches that only finish its output: they become its
	// epilogue (dag.Epilogue), one op, one cuBLASLt call on CUDA.
	FuseAuto Fusion = iota
	// FuseNone places the graph's ops as declared.
	FuseNone

	numFusions // keep last
)

var fusionNames = [numFusions]string{FuseAuto: "auto", FuseNone: "none"}

func (f Fusion) String() string {
	if f < numFusions {
		return fusionNames[f]
	}
	return fmt.Sprintf("Fusion(%d)", uint8(f))
}

// ParseFusion returns the fusion named s ("auto", "none").
func ParseFusion(s string) (Fusion, error) {
	for k, name := range fusionNames {
		if name == s {
			return Fusion(k), nil
		}
	}
	return 0, fmt.Errorf("unknown fusion %q: use auto or none", s)
}

// MarshalText writes f as ParseFusion reads it.
func (f Fusion) MarshalText() ([]byte, error) {
	if f >= numFusions {
		return nil, fmt.Errorf("unknown fusion %d", uint8(f))
	}
	return []byte(fusionNames[f]), nil
}

// UnmarshalText reads f as ParseFusion does: a Fusion is a flag's value
// through flag.TextVar, or a field of a JSON document.
func (f *Fusion) UnmarshalText(text []byte) error {
	v, err := ParseFusion(string(text))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// fusePass fuses each gemm with the launches of bias_add, then gelu or
// relu, that follow it on its output, into one gemm with an epilogue,
// named after all its parts ("fc1+bias1+gelu") (rewrite.Fuse). A graph
// with loops or branches is left as it is: the ops of their bodies are
// numbered after the graph's own (dag.Op.Index), which fusing would shift.
type fusePass struct{}

func (fusePass) Name() string { return "fuse" }
func (fusePass) Scope() Scope { return ScopeRewrite }

func (fusePass) Run(s *State) (string, error) {
	if len(s.Graph.Nested) > 0 {
		return "nothing fused: the graph has loops or branches", nil
	}
	var summary string
	in := s.Graph
	s.Graph, s.Parts, summary = rewrite.Fuse(s.Graph, s.Parts)
	if s.Graph != in {
		s.made = s.Graph
	}
	return summary, nil
}
