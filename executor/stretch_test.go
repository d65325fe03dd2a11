package executor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// submitter is fakeBackend taking steps in stretches (device.Submitter),
// each through the fake's Run, Record and Wait, keeping the stretch sizes.
type submitter struct {
	fakeBackend
	stretches []int
}

func (f *submitter) Open(context.Context, *dag.Graph) (device.Session, error) {
	return f, f.call("Open")
}

func (f *submitter) Submit(steps []device.Step) (int, error) {
	f.stretches = append(f.stretches, len(steps))
	for i, st := range steps {
		var err error
		switch st.Kind {
		case device.RunStep:
			err = f.Run(st.Stream, st.Op)
		case device.RecordStep:
			err = f.Record(st.Stream, st.Event)
		case device.WaitStep:
			err = f.Wait(st.Stream, st.Event)
		}
		if err != nil {
			return i, err
		}
	}
	return len(steps), nil
}

func fills(t *testing.T, n int) *planner.Plan {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4, dag.Zeros())
	for i := range n {
		b.Fill(x.All(), float64(i), dag.Name(fmt.Sprintf("fill%d", i)))
	}
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p
}

// A session that takes many steps at once gets a run's steps in stretches
// of at most 256, in order; a step's failure names its op; timed, a
// stretch's time is shared among its steps.
func TestSubmitStretches(t *testing.T) {
	p := fills(t, 600)
	f := &submitter{}
	s, err := executor.Open(context.Background(), f, p)
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background()))
	assert.Equal(t, []int{256, 256, len(p.Steps) - 512}, f.stretches)
	var ran []string
	for _, c := range f.calls {
		if len(c) > 4 && c[:4] == "Run " {
			ran = append(ran, c[4:])
		}
	}
	require.Len(t, ran, 600)
	assert.Equal(t, "fill0", ran[0])
	assert.Equal(t, p.Graph.Ops[599].Name, ran[599], "in the plan's order")

	f.failOp, f.runErr = p.Graph.Ops[300].Name, errors.New("boom")
	err = s.Run(context.Background())
	var oe *dag.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, p.Graph.Ops[300].Name, oe.Op, "the failing step's op is named")
	require.NoError(t, s.Close())

	// Timed, each stretch's time is shared among its steps.
	g := &submitter{}
	s, err = executor.Open(context.Background(), g, p, executor.WithSubmitTiming())
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, s.Run(context.Background()))
		costs, ok := s.SubmitCosts()
		require.True(t, ok)
		fill := costs.Ops[dag.Fill]
		assert.Equal(t, 600, fill.Count, "every op of the last run counted once")
		assert.Positive(t, fill.Total)
		assert.Equal(t, len(p.Steps)-600, costs.Records.Count+costs.Waits.Count)
	}
	assert.Equal(t, []int{256, 256, len(p.Steps) - 512, 256, 256, len(p.Steps) - 512}, g.stretches)
	assert.Equal(t, 1200, len(g.calls)-countNotRun(g.calls), "every op ran")
	require.NoError(t, s.Close())
}

func countNotRun(calls []string) int {
	n := 0
	for _, c := range calls {
		if len(c) < 4 || c[:4] != "Run " {
			n++
		}
	}
	return n
}

// Cancelling stops submission between stretches.
func TestSubmitStretchesCancelled(t *testing.T) {
	p := fills(t, 2000)
	ctx, cancel := context.WithCancel(context.Background())
	f := &submitter{}
	runs := 0
	f.onRun = func(*dag.Op) {
		if runs++; runs == 10 {
			cancel()
		}
	}
	s, err := executor.Open(context.Background(), f, p)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Run(ctx), context.Canceled)
	assert.Equal(t, []int{256}, f.stretches, "no stretch after the cancel")
	require.NoError(t, s.Close())
}
