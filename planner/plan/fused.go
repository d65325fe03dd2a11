package plan

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// Fused lists the IDs of the ops of the plan's graph that each run more
// than one declared op (Parts), in order; none for a plan of the graph
// as declared.
func (p *Plan) Fused() []int {
	var out []int
	for i, parts := range p.Parts {
		if len(parts) > 1 && i < len(p.Graph.Ops) {
			out = append(out, i)
		}
	}
	return out
}

// PartsOf returns the declared ops that op id of the plan's graph runs,
// in order: the op itself for a plan of the graph as declared.
func (p *Plan) PartsOf(id int) []*dag.Op {
	if p.Declared == nil || id < 0 || id >= len(p.Parts) {
		if op := p.op(int32(id)); op != nil {
			return []*dag.Op{op}
		}
		return nil
	}
	out := make([]*dag.Op, 0, len(p.Parts[id]))
	for _, d := range p.Parts[id] {
		if d >= 0 && int(d) < len(p.Declared.Ops) {
			out = append(out, p.Declared.Ops[d])
		}
	}
	return out
}

// Running returns the op of the plan's graph that runs op, an op of the
// graph as declared: op itself where nothing rewrote the graph, the fused
// op op became part of, or the copy of op the rewrite numbered anew. It is
// nil for an op of neither graph.
func (p *Plan) Running(op *dag.Op) *dag.Op {
	if op == nil || p.Graph == nil {
		return nil
	}
	if op.ID >= 0 && op.ID < len(p.Graph.Ops) && p.Graph.Ops[op.ID] == op {
		return op
	}
	if p.Declared == nil || op.ID < 0 || op.ID >= len(p.Declared.Ops) || p.Declared.Ops[op.ID] != op {
		return nil
	}
	for i, parts := range p.Parts {
		if i < len(p.Graph.Ops) && slices.Contains(parts, int32(op.ID)) {
			return p.Graph.Ops[i]
		}
	}
	return nil
}

// FusedText says what fused op id is made of, for people: "gemm fc1,
// bias_add bias1 and gelu act1, one gemm with epilogue bias_gelu".
func (p *Plan) FusedText(id int) string {
	parts := p.PartsOf(id)
	if len(parts) < 2 {
		return ""
	}
	var b strings.Builder
	for i, op := range parts {
		switch {
		case i == len(parts)-1:
			b.WriteString(" and ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(partName(op))
	}
	if op := p.op(int32(id)); op != nil && op.Gemm != nil {
		fmt.Fprintf(&b, ", one gemm with epilogue %s", op.Gemm.Epilogue)
	}
	return b.String()
}

// partName is a declared op as FusedText names it: its kernel's name for
// a launch, its kind otherwise, then its own name.
func partName(op *dag.Op) string {
	if k := op.Kernel(); k != nil && op.Kind == dag.Launch {
		return k.Name + " " + op.Name
	}
	return op.Kind.String() + " " + op.Name
}

// writeFused writes which ops of the plan are declared ops made one.
func (p *Plan) writeFused(w *bufio.Writer) {
	fused := p.Fused()
	if len(fused) == 0 {
		return
	}
	declared := map[int32]bool{}
	for _, id := range fused {
		for _, d := range p.Parts[id] {
			declared[d] = true
		}
	}
	fmt.Fprintf(w, "fused               %d %s %d declared ops\n", len(fused), plural(len(fused), "op runs", "ops run"), len(declared))
	for _, id := range fused {
		fmt.Fprintf(w, "  %s: %s\n", p.Graph.Ops[id].Name, p.FusedText(id))
	}
}

// Pieces lists the ops of the plan's graph that run one declared op, or
// one fused op, in pieces (the split pass: blocks of its rows), each
// op's pieces in order; none where nothing was split.
func (p *Plan) Pieces() [][]int {
	var out [][]int
	for i := 0; i < len(p.Parts) && i < len(p.Graph.Ops); {
		j := i + 1
		for j < len(p.Parts) && slices.Equal(p.Parts[j], p.Parts[i]) {
			j++
		}
		if j-i > 1 {
			ids := make([]int, 0, j-i)
			for k := i; k < j; k++ {
				ids = append(ids, k)
			}
			out = append(out, ids)
		}
		i = j
	}
	return out
}

// writePieces writes which ops of the plan run a declared op in pieces.
func (p *Plan) writePieces(w *bufio.Writer) {
	pieces := p.Pieces()
	if len(pieces) == 0 {
		return
	}
	n := 0
	for _, ps := range pieces {
		n += len(ps)
	}
	fmt.Fprintf(w, "split               %d %s in %d pieces\n", len(pieces), plural(len(pieces), "op runs", "ops run"), n)
	for _, ps := range pieces {
		fmt.Fprintf(w, "  %s .. %s\n", p.Graph.Ops[ps[0]].Name, p.Graph.Ops[ps[len(ps)-1]].Name)
	}
}

// jsonFused is one op that runs several declared ops.
type jsonFused struct {
	Op       string   `json:"op"`
	Parts    []string `json:"parts"`
	Epilogue string   `json:"epilogue,omitempty"`
}

func (p *Plan) jsonFused() []jsonFused {
	var out []jsonFused
	for _, id := range p.Fused() {
		op := p.Graph.Ops[id]
		f := jsonFused{Op: op.Name}
		for _, part := range p.PartsOf(id) {
			f.Parts = append(f.Parts, part.Name)
		}
		if op.Gemm != nil {
			f.Epilogue = op.Gemm.Epilogue.String()
		}
		out = append(out, f)
	}
	return out
}

// describeGemm writes a gemm as an instruction: its name and its shape,
// with its epilogue.
func describeGemm(w *bufio.Writer, op *dag.Op) {
	fmt.Fprintf(w, "gemm %s", op.Name)
	if op.Gemm != nil {
		fmt.Fprintf(w, " [%s]", op.Gemm)
	}
}

// jsonSplit is one declared op, or fused op, run in pieces.
type jsonSplit struct {
	Parts  []string `json:"parts"`
	Pieces []string `json:"pieces"`
}

func (p *Plan) jsonSplit() []jsonSplit {
	var out []jsonSplit
	for _, ps := range p.Pieces() {
		var s jsonSplit
		for _, part := range p.PartsOf(ps[0]) {
			s.Parts = append(s.Parts, part.Name)
		}
		for _, id := range ps {
			s.Pieces = append(s.Pieces, p.Graph.Ops[id].Name)
		}
		out = append(out, s)
	}
	return out
}
