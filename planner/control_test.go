package planner_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
)

// loopGraph: x is filled, then a loop "refine" whose body works on four
// quarters of x at once and clears the flag, then x is copied into y.
func loopGraph(t *testing.T) (*dag.Graph, *dag.Op) {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 1<<20, dag.Zeros())
	y := b.Buffer("y", 1<<20, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	b.Fill(x.All(), 1, dag.Name("init"))
	b.Fill(flag.All(), 1, dag.Name("arm"))
	loop := b.While(flag.All(), func(body *dag.Builder) {
		for q := range int64(4) {
			body.Fill(x.Slice(q<<18, 1<<18), float64(q), dag.Name("quarter"+string(rune('0'+q))))
		}
		body.Fill(flag.All(), 0, dag.Name("stop"))
	}, dag.Name("refine"), dag.AtMost(10))
	b.Copy(y.All(), x.All(), dag.Name("after"))
	g, err := b.Build()
	require.NoError(t, err)
	return g, loop
}

func TestPlanBodies(t *testing.T) {
	g, loop := loopGraph(t)
	p, err := planner.New(g, planner.Streams(4))
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))

	require.Len(t, p.Bodies, 1)
	require.Len(t, p.Bodies[loop.ID], 1)
	body := p.Bodies[loop.ID][0]
	assert.Same(t, loop.Control.Body, body.Graph)
	assert.Greater(t, len(body.Streams), 1, "independent body ops spread over streams")
	for _, s := range body.Streams {
		assert.Contains(t, s.Name, "refine/")
	}

	// The fork: the entry record first, then one wait per other stream.
	first := body.Steps[0]
	assert.Equal(t, planner.Step{Kind: planner.Record, Stream: 0, Op: -1, Event: first.Event}, first)
	forks := 0
	for _, st := range body.Steps[1:] {
		if st.Kind == planner.Wait && st.Event == first.Event {
			forks++
			assert.EqualValues(t, -1, st.Op)
		}
	}
	assert.Equal(t, len(body.Streams)-1, forks)
	// The join: the entry stream waits last.
	last := body.Steps[len(body.Steps)-1]
	assert.Equal(t, planner.Wait, last.Kind)
	assert.EqualValues(t, 0, last.Stream)
	assert.EqualValues(t, -1, last.Op)

	// The loop costs one pass of its body.
	s := perf.Simulate(p, nil, planner.Eager)
	assert.Equal(t, body.Stats.Makespan, s.Duration[loop.ID])
	assert.Equal(t, perf.Simulate(body, nil, planner.Replay).Makespan, body.Stats.Makespan, "a body is priced as a replay")
}

func TestPlanBodiesOneStream(t *testing.T) {
	g, loop := loopGraph(t)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))
	body := p.Bodies[loop.ID][0]
	require.Len(t, body.Streams, 1)
	// One stream: the entry record alone, no waits.
	assert.Equal(t, 1, body.Events)
	for _, st := range body.Steps {
		assert.NotEqual(t, planner.Wait, st.Kind)
	}
}

func TestPlanBranchesAndNesting(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	y := b.Buffer("y", 4096, dag.Zeros())
	flag := b.Buffer("flag", 8, dag.Of(dag.I32), dag.Zeros())
	outer := b.While(flag.Slice(0, 4), func(body *dag.Builder) {
		body.If(flag.Slice(4, 4), func(then *dag.Builder) {
			then.Fill(x.All(), 2, dag.Name("two"))
			then.Fill(y.All(), 2, dag.Name("ytwo"))
		}, func(els *dag.Builder) {
			els.Fill(x.All(), 1, dag.Name("one"))
		}, dag.Name("pick"))
		body.Fill(flag.Slice(0, 4), 0, dag.Name("stop"))
	}, dag.Name("outer"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))

	body := p.Bodies[outer.ID][0]
	pick := outer.Control.Body.Ops[0]
	require.Equal(t, "pick", pick.Name)
	require.Len(t, body.Bodies[pick.ID], 2, "then and else")
	then, els := body.Bodies[pick.ID][0], body.Bodies[pick.ID][1]
	assert.Contains(t, els.Streams[0].Name, "pick/else/")
	assert.Same(t, pick.Control.Else, els.Graph)
	// A branch lasts its longer body.
	s := perf.Simulate(body, nil, planner.Eager)
	assert.Equal(t, max(then.Stats.Makespan, els.Stats.Makespan), s.Duration[pick.ID])

	var text bytes.Buffer
	require.NoError(t, p.WriteText(&text))
	out := text.String()
	for _, want := range []string{
		"while outer (flag[0:4] != 0)",
		"    outer (body, while the flag is non-zero",
		"        if pick (flag[4:8] != 0)",
		"pick (then, when the flag is non-zero",
		"pick (else, when the flag is zero",
		"fill two",
	} {
		assert.Contains(t, out, want)
	}

	js, err := json.Marshal(p)
	require.NoError(t, err)
	var decoded struct {
		Steps []struct {
			Op     string `json:"op"`
			Bodies []struct {
				Steps []struct {
					Op     string            `json:"op"`
					Bodies []json.RawMessage `json:"bodies"`
				} `json:"steps"`
			} `json:"bodies"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(js, &decoded))
	i := slices.IndexFunc(decoded.Steps, func(s struct {
		Op     string `json:"op"`
		Bodies []struct {
			Steps []struct {
				Op     string            `json:"op"`
				Bodies []json.RawMessage `json:"bodies"`
			} `json:"steps"`
		} `json:"bodies"`
	}) bool {
		return s.Op == "outer"
	})
	require.GreaterOrEqual(t, i, 0)
	require.Len(t, decoded.Steps[i].Bodies, 1)
	nested := 0
	for _, st := range decoded.Steps[i].Bodies[0].Steps {
		if st.Op == "pick" {
			nested = len(st.Bodies)
		}
	}
	assert.Equal(t, 2, nested)
}

// TestVerifyCatchesBrokenBodies breaks the fork or the join of a body's
// plan, or the plan's bodies themselves, and expects Verify to say so.
func TestVerifyCatchesBrokenBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p, body *planner.Plan)
		kind   verify.Kind
		msg    string
	}{
		{"fork wait removed", func(_, body *planner.Plan) {
			i := slices.IndexFunc(body.Steps, func(st planner.Step) bool { return st.Kind == planner.Wait && st.Stream != 0 && st.Op == -1 })
			body.Steps = slices.Delete(body.Steps, i, i+1)
		}, verify.OutsideBody, "not forked from the entry stream"},
		{"join wait removed", func(_, body *planner.Plan) {
			body.Steps = body.Steps[:len(body.Steps)-1]
		}, verify.OutsideBody, "not joined back"},
		{"joins removed", func(_, body *planner.Plan) {
			i := slices.IndexFunc(body.Steps, func(st planner.Step) bool { return st.Kind == planner.Record && st.Stream != 0 && st.Op == -1 })
			body.Steps, body.Events = body.Steps[:i], int(body.Steps[i].Event)
		}, verify.OutsideBody, "not joined back"},
		{"body missing", func(p, _ *planner.Plan) { clear(p.Bodies) }, verify.Malformed, "has 1 bodies and the plan 0"},
		{"body of another graph", func(p, body *planner.Plan) {
			other := *body
			other.Graph = &dag.Graph{Buffers: body.Graph.Buffers}
			for id := range p.Bodies {
				p.Bodies[id] = []*planner.Plan{&other}
			}
		}, verify.Malformed, "not of its graph"},
		{"body op twice", func(_, body *planner.Plan) {
			i := slices.IndexFunc(body.Steps, func(st planner.Step) bool { return st.Kind == planner.Run })
			body.Steps = append(body.Steps, body.Steps[i])
		}, verify.OpTwice, "runs twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, loop := loopGraph(t)
			p, err := planner.New(g, planner.Streams(4))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			tc.mutate(p, p.Bodies[loop.ID][0])
			err = verify.Verify(p)
			require.Error(t, err)
			ve, ok := errors.AsType[*verify.Error](err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tc.kind, ve.Kind, "%v", err)
			assert.Contains(t, ve.Msg, tc.msg)
			if tc.kind == verify.OutsideBody {
				assert.Contains(t, ve.Msg, `while "refine", its body`)
			}
		})
	}
}

// TestBodyTemporaryLivesAcrossLoop: a temporary the body reads is live
// for the whole loop, so a temporary used by work beside the loop gets
// bytes of its own.
func TestBodyTemporaryLivesAcrossLoop(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Zeros())
	z := b.Buffer("z", 4096, dag.Zeros())
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	t1 := b.Buffer("t1", 4096, dag.Temporary())
	t2 := b.Buffer("t2", 4096, dag.Temporary())
	b.Fill(t1.All(), 1, dag.Name("fill_t1"))
	loop := b.While(flag.All(), func(body *dag.Builder) {
		body.Copy(x.All(), t1.All(), dag.Name("use_t1"))
		body.Fill(flag.All(), 0, dag.Name("stop"))
	}, dag.Name("loop"))
	// Beside the loop: nothing orders it against the loop.
	b.Fill(t2.All(), 2, dag.Name("fill_t2"))
	b.Copy(z.All(), t2.All(), dag.Name("use_t2"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(4))
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))
	assert.Contains(t, loop.Access, dag.Access{View: t1.All(), Mode: dag.Read}, "the loop reads what its body reads")

	var o1, o2 *plan.Temporary
	for i, tmp := range p.Memory.Temporaries {
		switch g.Buffers[tmp.Buffer].Name {
		case "t1":
			o1 = &p.Memory.Temporaries[i]
		case "t2":
			o2 = &p.Memory.Temporaries[i]
		}
	}
	require.NotNil(t, o1)
	require.NotNil(t, o2)
	overlap := o1.Offset < o2.Offset+o2.Bytes && o2.Offset < o1.Offset+o1.Bytes
	freeT1 := slices.IndexFunc(g.Ops, func(o *dag.Op) bool { return o.Kind == dag.Free && o.Buffer() == t1 })
	require.GreaterOrEqual(t, freeT1, 0)
	assert.Contains(t, g.Ops[freeT1].Deps, int32(loop.ID), "t1 is freed after the loop")
	if overlap {
		// Sharing bytes is only right when the plan orders them.
		require.NoError(t, verify.Verify(p))
	}
	// Forget that the loop reads t1: the arena check must catch a plan
	// that shares t1's bytes with t2 while the loop runs beside t2's use.
	if !overlap && p.OpStream[loop.ID] != p.OpStream[g.Ops[slices.IndexFunc(g.Ops, func(o *dag.Op) bool { return o.Name == "use_t2" })].ID] {
		o2.Offset = o1.Offset
		err := verify.Verify(p)
		require.Error(t, err)
		ve, ok := errors.AsType[*verify.Error](err)
		require.True(t, ok)
		assert.Equal(t, verify.ArenaOverlap, ve.Kind, "%v", err)
	}
}

func TestControlOpsNeedBodies(t *testing.T) {
	g, loop := loopGraph(t)
	// A hand-made graph whose loop lost its body.
	bad := *loop
	bad.Control = &dag.ControlSpec{Cond: loop.Control.Cond}
	ops := slices.Clone(g.Ops)
	ops[loop.ID] = &bad
	_, err := planner.New(&dag.Graph{Buffers: g.Buffers, Ops: ops})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refine")
	assert.Contains(t, err.Error(), "while has no body")
}

func TestEmptyLoopBodyRefused(t *testing.T) {
	b := dag.New()
	flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	x := b.Buffer("x", 64, dag.Zeros())
	b.While(flag.All(), func(*dag.Builder) {}, dag.Name("spin"))
	b.If(flag.All(), func(then *dag.Builder) { then.Fill(x.All(), 1) }, func(*dag.Builder) {}, dag.Name("pick"))
	g, err := b.Build()
	require.NoError(t, err)
	_, err = planner.New(g)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "spin": the loop's body is empty`)
	assert.NotContains(t, err.Error(), "pick", "a branch may do nothing")
}

// TestPlanTextNamesCondSetter: the text says which op sets a loop's flag
// last (dag.Op.CondSetter), where one does.
func TestPlanTextNamesCondSetter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setFlag   bool // the body ends in set_flag on the loop's flag; else in a fill of it
		want, not string
	}{
		{"set_flag", true, "refine (body, while the flag is non-zero, which again sets last, 1 stream", ""},
		{"fill", false, "refine (body, while the flag is non-zero, 1 stream", "sets last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dag.New()
			x := b.Buffer("x", 4, dag.Value(8))
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			b.While(flag.All(), func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 0.5, dag.Name("halve"))
				if tc.setFlag {
					body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), flag, x, 1.0, dag.Name("again"))
				} else {
					body.Fill(flag.All(), 0, dag.Name("again"))
				}
			}, dag.Name("refine"))
			g, err := b.Build()
			require.NoError(t, err)
			p, err := planner.New(g)
			require.NoError(t, err)
			var text bytes.Buffer
			require.NoError(t, p.WriteText(&text))
			assert.Contains(t, text.String(), tc.want)
			if tc.not != "" {
				assert.NotContains(t, text.String(), tc.not)
			}
		})
	}
}
