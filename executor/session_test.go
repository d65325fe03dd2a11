package executor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// fakeBackend records the calls it gets and fails where it is told to.
type fakeBackend struct {
	calls    []string
	failOp   string // Run of this op fails with runErr
	runErr   error
	failCall string // this call (NewStream, Record, ...) fails
	syncErr  error
	onRun    func(op *dag.Op)
	timing   bool
}

func (f *fakeBackend) call(name string) error {
	f.calls = append(f.calls, name)
	if name == f.failCall {
		return fmt.Errorf("%s refused", name)
	}
	return nil
}

// Open returns the fake itself as the session: its Close counts the
// session's.
func (f *fakeBackend) Open(context.Context, *dag.Graph) (device.Session, error) {
	return f, f.call("Open")
}
func (f *fakeBackend) NewStream(device int, p dag.Priority) error {
	return f.call("NewStream")
}
func (f *fakeBackend) NewEvent() error                  { return f.call("NewEvent") }
func (f *fakeBackend) Record(stream, event int) error   { return f.call("Record") }
func (f *fakeBackend) Wait(stream, event int) error     { return f.call("Wait") }
func (f *fakeBackend) Read(*dag.Buffer) ([]byte, error) { return []byte{1}, f.call("Read") }
func (f *fakeBackend) Close() error                     { return f.call("Close") }
func (f *fakeBackend) SetTiming(on bool)                { f.timing = on; f.calls = append(f.calls, "SetTiming") }
func (f *fakeBackend) Sync(ctx context.Context) error {
	if err := f.call("Sync"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.syncErr
}

func (f *fakeBackend) Run(stream int, op *dag.Op) error {
	if f.onRun != nil {
		f.onRun(op)
	}
	if err := f.call("Run " + op.Name); err != nil {
		return err
	}
	if op.Name == f.failOp {
		return f.runErr
	}
	return nil
}

func (f *fakeBackend) Spans(fn func(op, stream int, start, end time.Duration)) error {
	f.calls = append(f.calls, "Spans")
	fn(0, 1, time.Microsecond, 3*time.Microsecond)
	return nil
}

func (f *fakeBackend) count(name string) int {
	n := 0
	for _, c := range f.calls {
		if c == name {
			n++
		}
	}
	return n
}

// twoStreams is a hand-made plan of a -> b, a on stream 0 and b on
// stream 1; the ops of the temporary (there for Read to refuse) never run.
func twoStreams(t *testing.T) *planner.Plan {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Zeros())
	tmp := b.Buffer("tmp", 4, dag.Temporary())
	b.Fill(x.All(), 1, dag.Name("a"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0, dag.Name("b"))
	b.Fill(tmp.All(), 0, dag.Name("c"))
	g, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, "a", g.Ops[0].Name)
	require.Equal(t, "b", g.Ops[1].Name)
	return &planner.Plan{
		Graph:    g,
		Streams:  []planner.Stream{{ID: 0, Name: "s0"}, {ID: 1, Name: "s1"}},
		Events:   1,
		OpStream: append([]int32{0, 1}, make([]int32, len(g.Ops)-2)...),
		Steps: []planner.Step{
			{Kind: planner.Run, Stream: 0, Op: 0, Event: -1},
			{Kind: planner.Record, Stream: 0, Op: 0, Event: 0},
			{Kind: planner.Wait, Stream: 1, Op: 1, Event: 0},
			{Kind: planner.Run, Stream: 1, Op: 1, Event: -1},
		},
	}
}

func TestRunSubmitsInOrder(t *testing.T) {
	f := &fakeBackend{}
	s, err := executor.Open(context.Background(), f, twoStreams(t), executor.WithTiming())
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background()))
	assert.Equal(t, []string{"Open", "SetTiming", "NewStream", "NewStream", "NewEvent",
		"Run a", "Record", "Wait", "Run b", "Sync", "Spans"}, f.calls)
	assert.Equal(t, []executor.Span{{Op: 0, Stream: 1, Start: time.Microsecond, End: 3 * time.Microsecond}}, s.Spans())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.Equal(t, 1, f.count("Close"), "Close releases the backend once")
	assert.Error(t, s.Run(context.Background()), "Run after Close")
}

func TestRunErrors(t *testing.T) {
	opErr := &dag.OpError{Op: "b", Err: errors.New("device fault")}
	tests := []struct {
		name    string
		backend *fakeBackend
		op      string // the op the error must name; "" for none
		same    error  // the error must be exactly this one
		msg     string
	}{
		{"plain run error is named", &fakeBackend{failOp: "b", runErr: errors.New("out of memory")}, "b", nil, "out of memory"},
		{"op errors pass through", &fakeBackend{failOp: "b", runErr: opErr}, "b", opErr, "device fault"},
		{"record error names the op it follows", &fakeBackend{failCall: "Record"}, "a", nil, "record of event 0 on stream s0"},
		{"wait error names the op it precedes", &fakeBackend{failCall: "Wait"}, "b", nil, "wait of event 0 on stream s1"},
		{"sync op error passes through", &fakeBackend{syncErr: opErr}, "b", opErr, "device fault"},
		{"other sync errors say where", &fakeBackend{syncErr: errors.New("lost device")}, "", nil, "executor: sync: lost device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := executor.Open(context.Background(), tt.backend, twoStreams(t))
			require.NoError(t, err)
			err = s.Run(context.Background())
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.msg)
			if tt.same != nil {
				assert.Same(t, tt.same, err)
			}
			var e *dag.OpError
			if tt.op != "" {
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.op, e.Op)
			} else {
				assert.False(t, errors.As(err, &e))
			}
			assert.Equal(t, 1, tt.backend.count("Sync"), "the run is drained after an error")
			require.NoError(t, s.Close())
		})
	}
}

func TestOpenReleasesOnError(t *testing.T) {
	for _, call := range []string{"NewStream", "NewEvent"} {
		t.Run(call, func(t *testing.T) {
			f := &fakeBackend{failCall: call}
			_, err := executor.Open(context.Background(), f, twoStreams(t))
			assert.ErrorContains(t, err, call+" refused")
			assert.Equal(t, 1, f.count("Close"))
		})
	}
	t.Run("backend Open", func(t *testing.T) {
		f := &fakeBackend{failCall: "Open"}
		_, err := executor.Open(context.Background(), f, twoStreams(t))
		assert.ErrorContains(t, err, "Open refused")
		assert.Zero(t, f.count("Close"), "nothing to release")
	})
}

func TestOpenRefusesMalformedPlans(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(p *planner.Plan)
	}{
		{"no graph", func(p *planner.Plan) { p.Graph = nil }},
		{"stream out of range", func(p *planner.Plan) { p.Steps[0].Stream = 2 }},
		{"op out of range", func(p *planner.Plan) { p.Steps[3].Op = 99 }},
		{"event out of range", func(p *planner.Plan) { p.Steps[1].Event = 1 }},
		{"unknown step kind", func(p *planner.Plan) { p.Steps[1].Kind = 9 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := twoStreams(t)
			tt.spoil(p)
			f := &fakeBackend{}
			_, err := executor.Open(context.Background(), f, p)
			assert.Error(t, err)
			assert.Empty(t, f.calls, "the backend is not touched")
		})
	}
	_, err := executor.Open(context.Background(), nil, twoStreams(t))
	assert.Error(t, err)
}

func TestRunStopsWhenCancelled(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Zeros())
	for i := range 2000 {
		b.Fill(x.All(), float64(i))
	}
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	f := &fakeBackend{onRun: func(*dag.Op) {
		if runs++; runs == 10 {
			cancel()
		}
	}}
	s, err := executor.Open(context.Background(), f, p)
	require.NoError(t, err)
	err = s.Run(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.LessOrEqual(t, runs, 10+256, "submission stops within one context check")
	assert.Equal(t, 1, f.count("Sync"), "what was submitted is drained")

	runs = 0
	assert.ErrorIs(t, s.Run(ctx), context.Canceled)
	assert.Zero(t, runs, "a run with an ended context submits nothing")
	require.NoError(t, s.Close())
}

func TestRead(t *testing.T) {
	p := twoStreams(t)
	s, err := executor.Open(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background()))
	x, err := s.Read(p.Graph.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, dag.ElemBytes(dag.F32, 2), x)

	_, err = s.Read(p.Graph.Buffers[1])
	assert.ErrorContains(t, err, "temporary")
	_, err = s.Read(&dag.Buffer{Name: "stranger"})
	assert.ErrorContains(t, err, "stranger")
	_, err = s.Read(nil)
	assert.Error(t, err)
	require.NoError(t, s.Close())
	_, err = s.Read(p.Graph.Buffers[0])
	assert.Error(t, err, "Read after Close")
}

func TestExecuteClosesOnError(t *testing.T) {
	f := &fakeBackend{failOp: "a", runErr: errors.New("nope")}
	out, err := executor.Execute(context.Background(), f, twoStreams(t))
	assert.Nil(t, out)
	assert.ErrorContains(t, err, `op "a": nope`)
	assert.Equal(t, 1, f.count("Close"))
}
