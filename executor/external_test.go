package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

func noEnqueue(context.Context, dag.TaskStream) error { return nil }

// externalPlan: two independent tasks on two streams; the first copies
// the caller's value into x, the second sets a flag after a pause.
func externalPlan(t *testing.T, callerValue *atomic.Int32, late *atomic.Bool, fail error) (*planner.Plan, *dag.Buffer) {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
	y := b.Buffer("y", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
	b.Task(func(_ context.Context, on dag.TaskStream) error {
		binary.LittleEndian.PutUint32(on.Mem[0], uint32(callerValue.Load()))
		return fail
	}, dag.Out(x.All()), dag.Name("take"), dag.RunsOnCPU())
	b.Task(func(context.Context, dag.TaskStream) error {
		time.Sleep(20 * time.Millisecond)
		late.Store(true)
		return nil
	}, dag.Out(y.All()), dag.Name("late"), dag.RunsOnCPU())
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	require.Len(t, p.Streams, 2)
	return p, x
}

func TestExternalEvents(t *testing.T) {
	for _, replay := range []bool{false, true} {
		name := map[bool]string{false: "run", true: "replay"}[replay]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			be := cpu.New()
			var value atomic.Int32
			var late atomic.Bool
			p, x := externalPlan(t, &value, &late, nil)
			s, err := executor.Open(ctx, be, p)
			require.NoError(t, err)
			defer s.Close()
			after, done := be.NewEvent(), be.NewEvent()
			defer after.Close()
			defer done.Close()
			x2 := executor.External{After: after.Handle(), Done: done.Handle()}

			// The caller's work is under way: dagrun's must wait for it.
			reach := after.RecordPending()
			if replay {
				g, err := s.Capture(ctx)
				require.NoError(t, err)
				require.NoError(t, g.LaunchAfter(ctx, x2))
				defer func() { require.NoError(t, g.Sync(ctx)) }()
			} else {
				require.NoError(t, s.Enqueue(ctx, x2))
				defer func() { require.NoError(t, s.Sync(ctx)) }()
			}
			time.Sleep(30 * time.Millisecond)
			assert.False(t, late.Load(), "dagrun ran before the caller's event")
			assert.False(t, done.Query())
			value.Store(7)
			reach()

			// The caller waits for all of dagrun's streams.
			require.NoError(t, done.Wait(ctx))
			assert.True(t, late.Load(), "the done event was reached before the last stream finished")
			if !replay {
				require.NoError(t, s.Sync(ctx))
				got, err := s.Read(x)
				require.NoError(t, err)
				assert.Equal(t, uint32(7), binary.LittleEndian.Uint32(got), "dagrun read the caller's value before its event")
			}
		})
	}
}

func TestExternalEventsErrors(t *testing.T) {
	ctx := context.Background()
	be := cpu.New()
	var value atomic.Int32
	var late atomic.Bool
	p, _ := externalPlan(t, &value, &late, errors.New("library failed"))
	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer s.Close()
	done := be.NewEvent()
	defer done.Close()

	// A failing run still reaches the caller's event, and Sync names the op.
	err = s.RunAfter(ctx, executor.External{Done: done.Handle()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "take": library failed`)
	assert.True(t, done.Query())

	// A handle that is not an open event of the backend.
	closed := be.NewEvent()
	closed.Close()
	err = s.RunAfter(ctx, executor.External{After: closed.Handle()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an open event of this backend")

	// Events of another backend are not found either.
	other := cpu.New().NewEvent()
	err = s.RunAfter(ctx, executor.External{After: other.Handle() + 100})
	require.Error(t, err)

	// A backend session without ExternalEvents is refused by name.
	f := &fakeBackend{}
	fs, err := executor.Open(ctx, f, twoStreams(t))
	require.NoError(t, err)
	err = fs.RunAfter(ctx, executor.External{After: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot order its work with the caller's events")
}
