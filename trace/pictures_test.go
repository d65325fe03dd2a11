package trace_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/graph/encoding/dot"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// hostile is a name that breaks every picture that does not escape it.
const hostile = `<script>alert("x")</script> & 'q' ]]> \N \x01`

// hostilePlan is pipeline with one op named hostile.
func hostilePlan(t *testing.T) *planner.Plan {
	p := pipeline(t)
	opNamed(t, p, "busy").Name = hostile + "\x01"
	return p
}

func TestPlanDOT(t *testing.T) {
	p := pipeline(t)
	var buf bytes.Buffer
	require.NoError(t, trace.PlanDOT(&buf, p))
	out := buf.String()

	var again bytes.Buffer
	require.NoError(t, trace.PlanDOT(&again, p))
	assert.Equal(t, out, again.String(), "deterministic")

	// One cluster per stream, in lane order, each labelled with its priority.
	lanes := trace.FromPlan(p, nil).Lanes
	clusters := regexp.MustCompile(`subgraph cluster_s(\d+) \{`).FindAllStringSubmatch(out, -1)
	require.Len(t, clusters, len(p.Streams))
	for i, c := range clusters {
		assert.Equal(t, fmt.Sprint(lanes[i].Stream), c[1])
	}
	for _, s := range p.Streams {
		assert.Contains(t, out, fmt.Sprintf("label=%q", s.Name+" (priority normal) · "+s.Kind.String()))
	}
	// Every wait is an edge labelled with its event.
	for _, st := range p.Steps {
		if st.Kind == planner.Wait {
			assert.Contains(t, out, fmt.Sprintf("label=e%d", st.Event))
		}
	}
	assert.Contains(t, out, `label="upload\ncopy 1.0 MiB"`)
	assert.Contains(t, out, `rankdir=LR`)

	// It is DOT: gonum reads it back with one node per op.
	g := simple.NewDirectedGraph()
	require.NoError(t, dot.Unmarshal(buf.Bytes(), g))
	assert.Equal(t, len(p.Graph.Ops), g.Nodes().Len())
	waits := 0
	for _, st := range p.Steps {
		if st.Kind == planner.Wait {
			waits++
		}
	}
	orderEdges := len(p.Graph.Ops) - len(p.Streams)
	assert.Equal(t, orderEdges+waits, g.Edges().Len(), "stream order plus waits")
}

func TestPlanDOTEscapes(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, trace.PlanDOT(&buf, hostilePlan(t)))
	g := simple.NewDirectedGraph()
	require.NoError(t, dot.Unmarshal(buf.Bytes(), g), buf.String())
	assert.NotContains(t, buf.String(), "<script>alert(\"x\")", "the name is a quoted string, not HTML")
	require.Error(t, trace.PlanDOT(io.Discard, nil))
	require.Error(t, trace.PlanDOT(io.Discard, &planner.Plan{}))
}

// element is what the picture tests look for in SVG.
type element struct {
	name  string
	class string
	attrs map[string]string
	text  string
}

// parseSVG checks that doc is well-formed XML and lists its elements.
func parseSVG(t *testing.T, doc string) []element {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	var out []element
	var stack []int
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			e.class = e.attrs["class"]
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(tok)
			}
		}
	}
	return out
}

func count(els []element, class string) int {
	n := 0
	for _, e := range els {
		if e.class == class {
			n++
		}
	}
	return n
}

func TestPictures(t *testing.T) {
	p := pipeline(t)
	run := trace.FromRun(p, simulatedSpans(p, 0))
	est := trace.FromPlan(p, nil)
	tests := []struct {
		name  string
		tr    *trace.Trace
		write func(io.Writer) error
		html  bool
	}{
		{"plan svg", est, func(w io.Writer) error { return trace.PlanSVG(w, p) }, false},
		{"plan html", est, func(w io.Writer) error { return trace.PlanHTML(w, p) }, true},
		{"timeline svg", run, run.WriteSVG, false},
		{"timeline html", run, run.WriteHTML, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf, again bytes.Buffer
			require.NoError(t, tt.write(&buf))
			require.NoError(t, tt.write(&again))
			out := buf.String()
			assert.Equal(t, out, again.String(), "deterministic")
			assertSelfContained(t, out)

			svg := out
			if tt.html {
				assert.True(t, strings.HasPrefix(out, "<!DOCTYPE html>"))
				assert.Equal(t, 1, strings.Count(out, "<script>"), "one inline script")
				svg = out[strings.Index(out, "<svg") : strings.Index(out, "</svg>")+len("</svg>")]
			}
			els := parseSVG(t, svg)
			assert.Equal(t, len(tt.tr.Lanes), count(els, "lane"))
			assert.Equal(t, len(tt.tr.Slices), count(els, "op"))
			assert.Equal(t, len(tt.tr.Flows), count(els, "wait"))
			assert.GreaterOrEqual(t, count(els, "tick"), 4, "a time axis")

			ops := map[string]bool{}
			for i, e := range els {
				switch e.class {
				case "op":
					ops[e.attrs["data-op"]] = true
					require.Less(t, i+1, len(els))
					assert.Equal(t, "title", els[i+1].name, "every box has a hover text")
					assert.Contains(t, els[i+1].text, e.attrs["data-op"]+" (")
				}
			}
			for _, op := range p.Graph.Ops {
				assert.True(t, ops[op.Name], "op %s is drawn", op.Name)
			}
			// Copy lanes are tinted differently from compute lanes.
			var lanes []element
			for _, e := range els {
				if e.class == "lane" {
					lanes = append(lanes, e)
				}
			}
			for i, l := range tt.tr.Lanes {
				assert.Equal(t, l.Name, lanes[i].attrs["data-stream"])
				want := "#eef2f8"
				if l.Copy() {
					want = "#fcefdf"
				}
				assert.Equal(t, want, lanes[i].attrs["fill"], l.Name)
			}
		})
	}
}

// assertSelfContained checks that a page loads nothing from anywhere.
func assertSelfContained(t *testing.T, doc string) {
	t.Helper()
	for _, bad := range []string{"src=", "@import", "url(http", "<link", "@font-face", "href=\"http"} {
		assert.NotContains(t, doc, bad)
	}
	withoutNS := strings.ReplaceAll(doc, `xmlns="http://www.w3.org/2000/svg"`, "")
	assert.NotContains(t, withoutNS, "http://")
	assert.NotContains(t, withoutNS, "https://")
}

func TestPicturesEscapeNames(t *testing.T) {
	p := hostilePlan(t)
	tr := trace.FromRun(p, simulatedSpans(p, 0))
	for name, write := range map[string]func(io.Writer) error{
		"plan svg":      func(w io.Writer) error { return trace.PlanSVG(w, p) },
		"plan html":     func(w io.Writer) error { return trace.PlanHTML(w, p) },
		"timeline svg":  tr.WriteSVG,
		"timeline html": tr.WriteHTML,
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, write(&buf))
			out := buf.String()
			assert.NotContains(t, out, `<script>alert`)
			assert.NotContains(t, out, "\x01")
			start := strings.Index(out, "<svg")
			els := parseSVG(t, out[start:strings.Index(out, "</svg>")+len("</svg>")])
			found := false
			for _, e := range els {
				if e.class == "op" && strings.HasPrefix(e.attrs["data-op"], `<script>alert("x")</script> & 'q' ]]>`) {
					found = true
				}
			}
			assert.True(t, found, "the name survives escaping")
		})
	}
}

func TestPicturesOfEmptyAndOddTraces(t *testing.T) {
	for name, tr := range map[string]*trace.Trace{
		"empty":   {},
		"no ops":  {Lanes: []trace.Lane{{Name: "s"}}},
		"instant": {Lanes: []trace.Lane{{Name: "s"}}, Slices: []trace.Slice{{Name: "a", Kind: dag.Alloc}}},
		"long": {Lanes: []trace.Lane{{Name: "s"}}, Slices: []trace.Slice{
			{Name: "a", Kind: dag.Launch, Dur: 3 * time.Second}, {Name: "b", Kind: dag.Launch, Start: 3 * time.Second, Dur: 2 * time.Nanosecond}}},
	} {
		t.Run(name, func(t *testing.T) {
			var svg, page bytes.Buffer
			require.NoError(t, tr.WriteSVG(&svg))
			require.NoError(t, tr.WriteHTML(&page))
			els := parseSVG(t, svg.String())
			assert.Equal(t, len(tr.Lanes), count(els, "lane"))
			assert.Equal(t, len(tr.Slices), count(els, "op"))
		})
	}
}
