package trace

import (
	"errors"
	"fmt"
	"io"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/encoding"
	"gonum.org/v1/gonum/graph/encoding/dot"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
)

// PlanDOT writes p as a Graphviz digraph: a cluster per stream (in lane
// order, labelled with the stream's name and priority, copy streams tinted),
// its ops as boxes joined in stream order, and a red edge labelled with the
// event for every wait, from the op the event is recorded after to the op
// after the wait. The output depends only on p.
func PlanDOT(w io.Writer, p *planner.Plan) error {
	if p == nil || p.Graph == nil {
		return errors.New("trace: PlanDOT needs a plan of a graph")
	}
	lanes, laneOf := lanesOf(p.Streams)
	top := &dotGraph{DirectedGraph: simple.NewDirectedGraph(), id: "plan", attrs: []encoding.Attribute{
		{Key: "rankdir", Value: "LR"}, {Key: "newrank", Value: "true"}, {Key: "fontname", Value: "sans-serif"},
		{Key: "label", Value: planCaption(p)}, {Key: "labelloc", Value: "t"},
	}, nodeAttrs: []encoding.Attribute{
		{Key: "shape", Value: "box"}, {Key: "style", Value: "rounded,filled"}, {Key: "fontname", Value: "sans-serif"}, {Key: "fontsize", Value: "10"},
	}, edgeAttrs: []encoding.Attribute{{Key: "fontname", Value: "sans-serif"}, {Key: "fontsize", Value: "9"}}}

	addPlanDOT(top, top, p, lanes, laneOf, "")
	out, err := dot.Marshal(top, "", "", "  ")
	if err != nil {
		return fmt.Errorf("trace: writing the plan as DOT: %w", err)
	}
	out = append(out, '\n')
	_, err = w.Write(out)
	return err
}

// addPlanDOT adds plan p's streams to parent as clusters (their IDs
// starting with tag), its ops to them and its waits to top. The bodies of
// its loops and branches (p.Bodies) are clusters inside the control op's
// stream cluster, holding their own streams' clusters: a box around the
// ops the loop repeats. Nodes are named by dag.Op.Index, unique across
// the bodies; a body's events are its own, so their labels carry its tag.
func addPlanDOT(top, parent *dotGraph, p *planner.Plan, lanes []Lane, laneOf []int, tag string) {
	clusters := make([]*dotGraph, len(lanes))
	for i, l := range lanes {
		fill := laneFill(l)
		clusters[i] = &dotGraph{DirectedGraph: simple.NewDirectedGraph(), id: fmt.Sprintf("cluster_%ss%d", tag, l.Stream), attrs: []encoding.Attribute{
			{Key: "label", Value: l.Title() + " · " + l.Kind.String()}, {Key: "style", Value: "filled"}, {Key: "fillcolor", Value: fill}, {Key: "color", Value: "#b8bfcc"},
		}}
		parent.sub = append(parent.sub, clusters[i])
	}
	last := make([]graph.Node, len(p.Streams))
	recordedAfter := make([]int32, p.Events)
	for i := range recordedAfter {
		recordedAfter[i] = -1
	}
	waitEdges := map[[2]int64]*dotEdge{}
	index := func(op int32) int64 { return int64(p.Graph.Ops[op].Index) }
	for _, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= len(p.Streams) || st.Op < 0 || int(st.Op) >= len(p.Graph.Ops) {
			continue
		}
		switch st.Kind {
		case planner.Run:
			op := p.Graph.Ops[st.Op]
			n := opNode{id: index(st.Op), attrs: []encoding.Attribute{
				{Key: "label", Value: op.Name + "\n" + opDetail(op)}, {Key: "fillcolor", Value: kindFill(op.Kind, p.Streams[s].Kind)},
				{Key: "fontcolor", Value: kindText(op.Kind, p.Streams[s].Kind)},
			}}
			c := clusters[laneOf[s]]
			c.AddNode(n)
			if prev := last[s]; prev != nil {
				c.SetEdge(&dotEdge{from: prev, to: n, attrs: []encoding.Attribute{{Key: "color", Value: "#8a93a3"}, {Key: "arrowsize", Value: "0.6"}}})
			}
			last[s] = n
			addBodiesDOT(top, c, p, op)
		case planner.Record:
			if e := int(st.Event); e >= 0 && e < len(recordedAfter) {
				recordedAfter[e] = st.Op
			}
		case planner.Wait:
			e := int(st.Event)
			if e < 0 || e >= len(recordedAfter) || recordedAfter[e] < 0 {
				continue
			}
			key := [2]int64{index(recordedAfter[e]), index(st.Op)}
			if de, ok := waitEdges[key]; ok {
				de.label += fmt.Sprintf(",%se%d", tag, e)
				continue
			}
			de := &dotEdge{from: plainNode(key[0]), to: plainNode(key[1]), label: fmt.Sprintf("%se%d", tag, e)}
			waitEdges[key] = de
			if top.Node(key[0]) == nil {
				top.AddNode(plainNode(key[0]))
			}
			if top.Node(key[1]) == nil {
				top.AddNode(plainNode(key[1]))
			}
			top.SetEdge(de)
		}
	}
}

// addBodiesDOT adds the plans of control op op's bodies to c, the
// cluster of the stream it runs on, one cluster per body.
func addBodiesDOT(top, c *dotGraph, p *planner.Plan, op *dag.Op) {
	bodies := op.Bodies()
	for i, bp := range p.Bodies[op.ID] {
		if bp == nil || bp.Graph == nil || i >= len(bodies) {
			continue
		}
		what := "body"
		if op.Kind.Info().Body == dag.Branch {
			what = [...]string{"then", "else"}[min(i, 1)]
		}
		tag := fmt.Sprintf("b%d_%d_", op.Index, i)
		box := &dotGraph{DirectedGraph: simple.NewDirectedGraph(), id: "cluster_" + tag + "box", attrs: []encoding.Attribute{
			{Key: "label", Value: op.Name + " " + what + " · " + opDetail(op)}, {Key: "style", Value: "rounded,dashed"}, {Key: "color", Value: kindFill(op.Kind, planner.Compute)},
		}}
		c.sub = append(c.sub, box)
		lanes, laneOf := lanesOf(bp.Streams)
		addPlanDOT(top, box, bp, lanes, laneOf, tag)
	}
}

// planCaption is the figures line under a plan picture.
func planCaption(p *planner.Plan) string {
	s := p.Stats
	fused := ""
	if n := len(p.Fused()); n > 0 {
		fused = fmt.Sprintf(" (%s of several declared ops)", human.Count(n, "fused op", "fused ops"))
	}
	return fmt.Sprintf("%s%s on %s, %s, %s; estimated makespan %s, critical path %s",
		human.Count(s.Ops, "op", "ops"), fused, human.Count(s.Streams, "stream", "streams"), human.Count(s.CrossEdges, "cross-stream edge", "cross-stream edges"),
		human.Count(s.Waits, "wait", "waits"), fmtDur(s.Makespan), fmtDur(s.CriticalPath))
}

// opDetail is the second line of an op's label: what it does, briefly.
func opDetail(op *dag.Op) string {
	st := kindStyles[op.Kind]
	if st.detail != nil {
		if d := st.detail(op); d != "" {
			return d
		}
	}
	if st.bytesInLabel {
		if b := op.Bytes(); b > 0 {
			return op.Kind.String() + " " + dag.FormatBytes(b)
		}
	}
	return op.Kind.String()
}

func launchDetail(op *dag.Op) string {
	if k := op.Kernel(); k != nil {
		return "launch " + k.Name
	}
	return ""
}

func gemmDetail(op *dag.Op) string {
	if op.Gemm != nil {
		return "gemm " + op.Gemm.String()
	}
	return ""
}

// dotGraph is a directed graph with a DOT name, attributes and subgraphs.
type dotGraph struct {
	*simple.DirectedGraph
	id                          string
	attrs, nodeAttrs, edgeAttrs []encoding.Attribute
	sub                         []*dotGraph
}

func (g *dotGraph) DOTID() string { return g.id }

func (g *dotGraph) DOTAttributers() (graph, node, edge encoding.Attributer) {
	return attrList(g.attrs), attrList(g.nodeAttrs), attrList(g.edgeAttrs)
}

func (g *dotGraph) Structure() []dot.Graph {
	out := make([]dot.Graph, len(g.sub))
	for i, s := range g.sub {
		out[i] = s
	}
	return out
}

type attrList []encoding.Attribute

func (a attrList) Attributes() []encoding.Attribute { return a }

// opNode is an op inside its stream's cluster; plainNode names the same op
// where a wait edge between clusters refers to it.
type (
	opNode struct {
		id    int64
		attrs []encoding.Attribute
	}
	plainNode int64
)

func (n opNode) ID() int64                        { return n.id }
func (n opNode) DOTID() string                    { return fmt.Sprintf("op%d", n.id) }
func (n opNode) Attributes() []encoding.Attribute { return n.attrs }
func (n plainNode) ID() int64                     { return int64(n) }
func (n plainNode) DOTID() string                 { return fmt.Sprintf("op%d", int64(n)) }

// dotEdge is a stream-order edge (attrs) or a wait edge (label).
type dotEdge struct {
	from, to graph.Node
	label    string
	attrs    []encoding.Attribute
}

func (e *dotEdge) From() graph.Node { return e.from }
func (e *dotEdge) To() graph.Node   { return e.to }
func (e *dotEdge) ReversedEdge() graph.Edge {
	return &dotEdge{from: e.to, to: e.from, label: e.label, attrs: e.attrs}
}
func (e *dotEdge) Attributes() []encoding.Attribute {
	if e.label == "" {
		return e.attrs
	}
	return []encoding.Attribute{{Key: "label", Value: e.label}, {Key: "color", Value: waitColour}, {Key: "fontcolor", Value: waitColour}}
}
