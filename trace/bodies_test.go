package trace_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// loopPlan is a graph with a loop, init -> refine{scale, set_flag} ->
// after, planned by hand onto one stream (the planner's bodies are not
// needed to trace spans of body ops): top-level ops 0-2, body ops
// Index 3 and 4.
func loopPlan(t *testing.T) *planner.Plan {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("init"))
	b.While(flag.All(), func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 0.5)
		body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(x.Slice(0, 4)), 0.1)
	}, dag.AtMost(10), dag.Name("refine"))
	b.Fill(x.All(), 2, dag.Name("after"))
	g, err := b.Build()
	require.NoError(t, err)
	return &planner.Plan{
		Graph:    g,
		Streams:  []planner.Stream{{ID: 0, Kind: planner.Compute, Name: "dev0.normal.compute0"}},
		Steps:    []planner.Step{{Kind: planner.Run, Op: 0, Event: -1}, {Kind: planner.Run, Op: 1, Event: -1}, {Kind: planner.Run, Op: 2, Event: -1}},
		OpStream: []int32{0, 0, 0},
	}
}

// loopSpans: init 0-10, three iterations of the body (scale 10 µs, then
// set_flag 2 µs; the body ops' stream is one the plan lacks, as a
// body's own stream is), after 50-60.
func loopSpans() []executor.Span {
	spans := []executor.Span{{Op: 0, Stream: 0, Start: 0, End: 10 * us}}
	for k := range 3 {
		at := 10*us + time.Duration(k)*13*us
		spans = append(spans, executor.Span{Op: 3, Stream: 7, Start: at, End: at + 10*us}, executor.Span{Op: 4, Stream: 7, Start: at + 11*us, End: at + 13*us})
	}
	return append(spans, executor.Span{Op: 2, Stream: 0, Start: 50 * us, End: 60 * us})
}

func TestTraceOfLoop(t *testing.T) {
	p := loopPlan(t)
	tr := trace.FromRun(p, loopSpans())
	require.Len(t, tr.Slices, 8)
	var iters []int
	for _, s := range tr.Slices {
		if s.Op == 3 {
			assert.Equal(t, "refine/scale0", s.Name)
			assert.True(t, s.Loop)
			assert.Equal(t, 0, s.Lane, "drawn on the loop's stream")
			iters = append(iters, s.Iter)
		}
		if s.Op == 0 || s.Op == 2 {
			assert.False(t, s.Loop, s.Name)
		}
	}
	assert.Equal(t, []int{0, 1, 2}, iters)
	assert.Equal(t, []trace.LoopRun{{Op: 1, Name: "refine", Iterations: 3}}, tr.Loops)
	assert.Equal(t, 59*us, tr.Figures.CriticalPath, "init 10, the loop's body 10-49, after 10")

	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	assert.Contains(t, buf.String(), `"name":"refine/scale0 #2"`)
	assert.Contains(t, buf.String(), `"iter":2`)
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	assert.Equal(t, tr.Loops, back.Loops)
	assert.Equal(t, tr.Slices, back.Slices)

	s := tr.Summarize()
	assert.Equal(t, []trace.LoopSummary{{Name: "refine", Runs: 1, Min: 3, Max: 3}}, s.Loops)
	buf.Reset()
	require.NoError(t, tr.WriteSummary(&buf))
	assert.Regexp(t, `loop\s+runs\s+iterations\nrefine\s+1\s+3\n`, buf.String())

	samples, err := trace.PerfSamples(p.Graph, loopSpans())
	require.NoError(t, err)
	assert.Len(t, samples, 8)
	assert.Equal(t, "refine/set_flag1", samples[2].Op.Name)
}

// A backend that timed a sample of a loop's iterations gives their count
// with the loop's own span: the trace counts them all and says how many
// were timed, in the summary, the picture and the file.
func TestSampledLoop(t *testing.T) {
	p := loopPlan(t)
	spans := append(loopSpans(), executor.Span{Op: 1, Stream: 0, Start: 10 * us, End: 49 * us, Iterations: 1000})
	tr := trace.FromRun(p, spans)
	assert.Equal(t, []trace.LoopRun{{Op: 1, Name: "refine", Iterations: 1000, Timed: 3}}, tr.Loops)
	s := tr.Summarize()
	assert.Equal(t, []trace.LoopSummary{{Name: "refine", Runs: 1, Min: 1000, Max: 1000, Timed: 3}}, s.Loops)
	var buf bytes.Buffer
	require.NoError(t, tr.WriteSummary(&buf))
	assert.Regexp(t, `refine\s+1\s+1000 \(first 3 timed op by op\)\n`, buf.String())
	buf.Reset()
	require.NoError(t, tr.WriteSVG(&buf))
	assert.Contains(t, buf.String(), "loop refine: the first 3 of its 1000 iterations (a sample timed op by op)")
	buf.Reset()
	require.NoError(t, tr.WriteChrome(&buf))
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	assert.Equal(t, tr.Loops, back.Loops)

	// A count no greater than the slices changes nothing.
	spans[len(spans)-1].Iterations = 2
	assert.Equal(t, []trace.LoopRun{{Op: 1, Name: "refine", Iterations: 3}}, trace.FromRun(p, spans).Loops)
}

func TestLoopIterationsOverRuns(t *testing.T) {
	p := loopPlan(t)
	second := loopSpans()[:3] // one iteration: scale and set_flag
	tr := trace.FromRuns(p, []trace.RunSpans{{Run: 1, Spans: loopSpans()}, {Run: 2, Start: 100 * us, Spans: second}})
	s := tr.Summarize()
	assert.Equal(t, []trace.LoopSummary{{Name: "refine", Runs: 2, Min: 1, Max: 3}}, s.Loops)
	var buf bytes.Buffer
	require.NoError(t, tr.WriteSummary(&buf))
	assert.Regexp(t, `refine\s+2\s+1-3\n`, buf.String())
}

// withBodyPlan gives p's loop a plan of its body on two streams of its
// own, set_flag waiting for scale through the body's event 0.
func withBodyPlan(p *planner.Plan) *planner.Plan {
	body := p.Graph.Ops[1].Control.Body
	p.Bodies = map[int][]*planner.Plan{1: {{
		Graph: body,
		Streams: []planner.Stream{{ID: 0, Kind: planner.Compute, Name: "refine.body0"},
			{ID: 1, Kind: planner.Compute, Name: "refine.body1"}},
		Steps: []planner.Step{{Kind: planner.Run, Stream: 0, Op: 0, Event: -1}, {Kind: planner.Record, Stream: 0, Op: 0, Event: 0},
			{Kind: planner.Wait, Stream: 1, Op: 1, Event: 0}, {Kind: planner.Run, Stream: 1, Op: 1, Event: -1}},
		Events:   1,
		OpStream: []int32{0, 1},
	}}}
	return p
}

func TestPlanDOTShowsBodies(t *testing.T) {
	p := withBodyPlan(loopPlan(t))
	var buf bytes.Buffer
	require.NoError(t, trace.PlanDOT(&buf, p))
	out := buf.String()
	assert.Contains(t, out, "subgraph cluster_b1_0_box {")
	assert.Contains(t, out, "refine body · while flag (max 10)")
	assert.Contains(t, out, "subgraph cluster_b1_0_s1 {")
	assert.Contains(t, out, `refine/scale0\nlaunch scale`)
	assert.Regexp(t, `op3 -> op4 \[\s*label=b1_0_e0`, out, "the body's wait, its event tagged")
	// The body's box is inside the loop's stream's cluster.
	assert.Less(t, strings.Index(out, "subgraph cluster_s0 {"), strings.Index(out, "subgraph cluster_b1_0_box {"))
}
