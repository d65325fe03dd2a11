package trace_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// controlPlan plans a graph with a loop holding a branch (then and else)
// and a loop within it: init -> outer{scale, pick{halve | double},
// inner{scale, set_flag}, set_flag} -> after.
func controlPlan(t *testing.T) *planner.Plan {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	sel := b.Buffer("sel", 4, dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("init"))
	b.While(flag.All(), func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 0.5, dag.Name("shrink"))
		body.If(sel.All(), func(then *dag.Builder) {
			then.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 0.5, dag.Name("halve"))
		}, func(els *dag.Builder) {
			els.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 2, dag.Name("double"))
		}, dag.Name("pick"))
		body.While(sel.All(), func(in *dag.Builder) {
			in.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(sel.All()), dag.In(x.Slice(0, 4)), 0.1, dag.Name("settle"))
		}, dag.Name("inner"))
		body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(x.Slice(0, 4)), 0.1, dag.Name("converged"))
	}, dag.AtMost(10), dag.Name("outer"))
	b.Fill(x.All(), 2, dag.Name("after"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

func TestPlanPicturesShowBodies(t *testing.T) {
	p := controlPlan(t)
	tests := []struct {
		name  string
		write func(io.Writer) error
		html  bool
	}{
		{"svg", func(w io.Writer) error { return trace.PlanSVG(w, p) }, false},
		{"html", func(w io.Writer) error { return trace.PlanHTML(w, p) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf, again bytes.Buffer
			require.NoError(t, tt.write(&buf))
			require.NoError(t, tt.write(&again))
			out := buf.String()
			assert.Equal(t, out, again.String(), "deterministic")
			if tt.html {
				out = out[strings.Index(out, "<svg") : strings.Index(out, "</svg>")+len("</svg>")]
			}
			els := parseSVG(t, out)

			// A box per body: outer's, pick's then and else, inner's.
			var boxes []string
			ops := map[string]bool{}
			for i, e := range els {
				switch e.class {
				case "body":
					boxes = append(boxes, e.attrs["data-op"]+" "+e.attrs["data-body"])
					require.Less(t, i+1, len(els))
					assert.Equal(t, "title", els[i+1].name, "every box has a hover text")
				case "op":
					ops[e.attrs["data-op"]] = true
				}
			}
			assert.Equal(t, []string{"outer body", "pick then", "pick else", "inner body"}, boxes, "outer boxes first")
			for _, name := range []string{"init", "outer", "after", "shrink", "pick", "halve", "double", "inner", "settle", "converged"} {
				assert.True(t, ops[name], "op %s is drawn", name)
			}
			assert.Contains(t, out, "outer · while flag (max 10) · one pass ")
			assert.Contains(t, out, "pick then · if sel · ")
			assert.Contains(t, out, ">while outer<")
			assert.Contains(t, out, ">if pick else<")
			// Lanes: the plan's, then every body's streams.
			lanes := len(p.Streams)
			var count func(bodies map[int][]*planner.Plan)
			count = func(bodies map[int][]*planner.Plan) {
				for _, bs := range bodies {
					for _, b := range bs {
						lanes += len(b.Streams)
						count(b.Bodies)
					}
				}
			}
			count(p.Bodies)
			assert.Equal(t, lanes, countClass(els, "lane"))
			assert.Contains(t, out, `data-stream="pick/else/dev0.normal.compute0"`)
		})
	}
}

// TestPlanPictureBodyTimes checks that a body's ops sit in the control
// op's time: the box starts where the loop starts and lasts one pass.
func TestPlanPictureBodyTimes(t *testing.T) {
	p := withBodyPlan(loopPlan(t))
	var buf bytes.Buffer
	require.NoError(t, trace.PlanSVG(&buf, p))
	els := parseSVG(t, buf.String())
	var loop, box, scale element
	for i, e := range els {
		switch {
		case e.class == "op" && e.attrs["data-op"] == "refine":
			loop = els[i+2] // g, title, rect
		case e.class == "op" && e.attrs["data-op"] == "refine/scale0":
			scale = els[i+2]
		case e.class == "body":
			box = els[i+3] // g, title, header text, rect
		}
	}
	require.Equal(t, "rect", loop.name)
	require.Equal(t, "rect", box.name)
	require.Equal(t, "rect", scale.name)
	assert.Equal(t, loop.attrs["x"], box.attrs["x"], "the box starts with the loop")
	assert.Equal(t, loop.attrs["width"], box.attrs["width"], "and lasts its one pass")
	assert.GreaterOrEqual(t, num(t, scale.attrs["x"]), num(t, box.attrs["x"]))
}

func TestTimelineBracketsLoops(t *testing.T) {
	p := loopPlan(t)
	tr := trace.FromRun(p, loopSpans())
	var chrome bytes.Buffer
	require.NoError(t, tr.WriteChrome(&chrome))
	back, err := trace.ReadChrome(&chrome)
	require.NoError(t, err)
	tests := []struct {
		name string
		tr   *trace.Trace
	}{
		{"built", tr},
		{"read back", back},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tt.tr.WriteSVG(&buf))
			out := buf.String()
			els := parseSVG(t, out)
			require.Equal(t, 1, countClass(els, "loop"), "one bracket over the loop's iterations")
			for i, e := range els {
				if e.class == "loop" {
					assert.Equal(t, "refine", e.attrs["data-op"])
					assert.Equal(t, "3", e.attrs["data-iterations"])
					assert.Contains(t, els[i+1].text, "loop refine: 3 iterations from 10.0 µs to 49.0 µs")
					d := els[i+2].attrs["d"]
					assert.Equal(t, 3, strings.Count(d, "M"), "its ends, and ticks at iterations #1 and #2")
				}
			}
			assert.Contains(t, out, "refine/scale0 #2</text>", "a box's label carries its iteration")
			assert.Contains(t, out, "iteration #2 of its loop")
		})
	}
	// Without loops the picture has no bracket.
	var buf bytes.Buffer
	require.NoError(t, trace.FromRun(pipeline(t), simulatedSpans(pipeline(t), 0)).WriteSVG(&buf))
	assert.Equal(t, 0, countClass(parseSVG(t, buf.String()), "loop"))
}

func countClass(els []element, class string) int { return count(els, class) }

func num(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	_, err := fmt.Sscan(s, &f)
	require.NoError(t, err)
	return f
}
