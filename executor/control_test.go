package executor_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// noControl opens cpu sessions that hide device.Controller.
type noControl struct{ *cpu.Backend }

func (n noControl) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := n.Backend.Open(ctx, g)
	if err != nil {
		return nil, err
	}
	return struct{ device.Session }{s}, nil
}

// bodyLog opens cpu sessions that note what SetBodies gets.
type bodyLog struct {
	*cpu.Backend
	got map[string][][]device.Step
}

func (l *bodyLog) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := l.Backend.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return &loggedSession{Session: s, l: l}, nil
}

type loggedSession struct {
	*cpu.Session
	l *bodyLog
}

func (s *loggedSession) SetBodies(op *dag.Op, bodies [][]device.Step) error {
	s.l.got[op.Name] = bodies
	return s.Session.SetBodies(op, bodies)
}

// scaledLoop: x (ones) is scaled by 0.5 in a loop of n iterations whose
// body also runs a branch on a flag set to branch: it doubles y (ones),
// or clears it.
func scaledLoop(t *testing.T, n int, branch bool) *dag.Graph {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4096, dag.Value(1))
	y := b.Buffer("y", 4096, dag.Value(1))
	pick := b.Buffer("pick", 4, dag.Of(dag.I32), dag.Zeros())
	c := dagtest.NewCounter(b, "flag", n)
	c.Arm(b)
	v := 0.0
	if branch {
		v = 1
	}
	b.Fill(pick.All(), v)
	b.While(c.Flag.All(), func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 0.5)
		body.If(pick.All(), func(then *dag.Builder) {
			then.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), y, 2.0)
		}, func(els *dag.Builder) {
			els.Fill(y.All(), 0)
		}, dag.Name("branch"))
		c.Step(body)
	}, dag.AtMost(100), dag.Name("loop"))
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

func TestRunPlanWithBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		branch bool
		x, y   float32
	}{
		{"then", 3, true, 0.125, 8},
		{"else", 2, false, 0.25, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := scaledLoop(t, tc.n, tc.branch)
			p, err := planner.New(g, planner.Streams(2))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			be := &bodyLog{Backend: cpu.New(), got: map[string][][]device.Step{}}
			out, err := executor.Execute(context.Background(), be, p)
			require.NoError(t, err)
			byName := map[string]float32{}
			for buf, data := range out {
				byName[buf.Name] = math.Float32frombits(binary.LittleEndian.Uint32(data))
			}
			assert.Equal(t, tc.x, byName["x"])
			assert.Equal(t, tc.y, byName["y"])

			// The bodies come in the session's numbering: after the plan's
			// streams and events.
			require.Contains(t, be.got, "loop")
			require.Contains(t, be.got, "branch")
			require.Len(t, be.got["branch"], 2)
			for name, bodies := range be.got {
				for _, steps := range bodies {
					require.NotEmpty(t, steps, name)
					for _, st := range steps {
						assert.GreaterOrEqual(t, st.Stream, len(p.Streams), "%s: body steps run on body streams", name)
						if st.Kind != device.RunStep {
							assert.GreaterOrEqual(t, st.Event, p.Events, "%s: body events come after the plan's", name)
						}
					}
				}
			}
		})
	}
}

// TestBodiesEagerAndReplayed: automatic capture replays a plan with
// loops; every run gives what the eager runs give.
func TestBodiesEagerAndReplayed(t *testing.T) {
	g := scaledLoop(t, 2, true)
	p, err := planner.New(g)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(cpu.Delays(3, 20e3)), p, executor.WithAutoCapture(2))
	require.NoError(t, err)
	defer s.Close()
	x := g.Buffers[0]
	want := float32(1)
	for run := range 5 {
		require.NoError(t, s.Run(ctx), "run %d", run)
		want /= 4
		data, err := s.Read(x)
		require.NoError(t, err)
		assert.Equal(t, want, math.Float32frombits(binary.LittleEndian.Uint32(data)), "run %d", run)
	}
	log := s.RunLog()
	assert.NoError(t, log.NotCaptured)
	assert.Equal(t, 2, log.CapturedAfter, "%+v", log)
}

func TestOpenRefusesBackendWithoutLoops(t *testing.T) {
	g := scaledLoop(t, 1, true)
	p, err := planner.New(g)
	require.NoError(t, err)
	_, err = executor.Open(context.Background(), noControl{cpu.New()}, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "loop"`)
	assert.Contains(t, err.Error(), "runs no loops or branches")
}

// countingSessions are cpu sessions that time each loop as a whole too
// and say each run of it ran 1000 iterations, as a backend that timed a
// sample of them does.
type countingSessions struct{ *cpu.Backend }

func (b countingSessions) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := b.Backend.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return countingSession{s, g}, nil
}

type countingSession struct {
	*cpu.Session
	g *dag.Graph
}

func (s countingSession) Spans(f func(op, stream int, start, end time.Duration)) error {
	var first, last time.Duration
	err := s.Session.Spans(func(op, stream int, start, end time.Duration) {
		first, last = min(first, start), max(last, end)
		f(op, stream, start, end)
	})
	for _, op := range s.g.Ops {
		if op.Kind.Info().Body == dag.Loop {
			f(op.Index, 0, first, last)
		}
	}
	return err
}

func (s countingSession) LoopIterations(f func(op, iterations int)) {
	for _, op := range s.g.Ops {
		if op.Kind.Info().Body == dag.Loop {
			f(op.Index, 1000)
		}
	}
}

// A backend's count of a loop's iterations reaches the loop's own span of
// each run, and no other span.
func TestSpansCarryLoopIterations(t *testing.T) {
	g := scaledLoop(t, 3, true)
	p, err := planner.New(g)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, countingSessions{cpu.New()}, p, executor.WithTiming())
	require.NoError(t, err)
	defer s.Close()
	for range 2 {
		require.NoError(t, s.Run(ctx))
		counted := 0
		for _, sp := range s.Spans() {
			if g.OpAt(sp.Op).Name == "loop" {
				assert.Equal(t, 1000, sp.Iterations)
				counted++
			} else {
				assert.Zero(t, sp.Iterations, g.OpAt(sp.Op).Name)
			}
		}
		assert.Equal(t, 1, counted, "the loop's span")
	}
}
