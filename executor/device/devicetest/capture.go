package devicetest

import (
	"encoding/binary"
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

// capture: what is submitted between BeginCapture and EndCapture is
// recorded, not run; each launch replays it whole, its forked stream
// joined back so that the origin's next op follows it; UpdateGraph swaps
// in a fresh capture.
func (s *suite) capture(t *testing.T) {
	var x, y *dag.Buffer
	var fill, spin, axpy2, axpy3, scale *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		y = b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		fill = b.Fill(x.All(), 1)
		spin = b.Launch(dag.Spin, one, one, float64(spinUS))
		axpy2 = b.Launch(dag.Axpy, one, dag.Threads(4), y, x, float32(2))
		axpy3 = b.Launch(dag.Axpy, one, dag.Threads(4), y, x, float32(3))
		scale = b.Launch(dag.Scale, one, dag.Threads(4), y, float32(10))
	})
	ds := s.session(t, g, 2, 1)
	c := capability[device.Capturer](t, ds)
	record := func(axpy *dag.Op) int {
		t.Helper()
		require.NoError(t, c.BeginCapture(0))
		require.NoError(t, ds.Run(0, fill))
		require.NoError(t, ds.Record(0, 0))
		require.NoError(t, ds.Wait(1, 0)) // fork: stream 1 follows the fill
		require.NoError(t, ds.Run(1, spin))
		require.NoError(t, ds.Run(1, axpy)) // EndCapture joins stream 1 back
		id, err := c.EndCapture(0)
		require.NoError(t, err)
		return id
	}
	graph := record(axpy2)
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(0, 4), readF32(t, ds, y), "a capture runs nothing")

	require.NoError(t, c.Instantiate(graph))
	for range 3 {
		require.NoError(t, c.LaunchGraph(graph, 0))
	}
	require.NoError(t, ds.Run(0, scale))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(60, 4), readF32(t, ds, y), "three replays add 2 each, then the origin's scale by 10 follows the joined stream")

	fresh := record(axpy3)
	inPlace, err := c.UpdateGraph(graph, fresh)
	require.NoError(t, err)
	t.Logf("UpdateGraph in place: %v", inPlace)
	require.NoError(t, c.LaunchGraph(graph, 0))
	require.NoError(t, s.sync(t, ds))
	assert.Equal(t, repeat(63, 4), readF32(t, ds, y), "the updated graph adds 3")
	require.NoError(t, c.DestroyGraph(graph))
}

// bodies: a loop's body, given by SetBodies on an entry stream and a
// stream it forks to, runs while its flag is set; the loop's stream
// follows the body's last pass, joined back on the entry stream.
func (s *suite) bodies(t *testing.T) {
	var x, sum, flag, out *dag.Buffer
	var loop, cp *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		sum = b.Buffer("sum", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		flag = b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Value(1))
		out = b.Buffer("out", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		loop = b.While(flag.All(), func(body *dag.Builder) {
			body.Launch(dag.Scale, one, dag.Threads(4), x, float32(0.5))
			body.Launch(dag.Spin, one, one, float64(spinUS/4))
			body.Launch(dag.ReduceSum, one, one, sum, x)
			body.Launch(dag.SetFlag, one, one, flag, sum, 0.3)
		}, dag.AtMost(100))
		cp = b.Copy(out.All(), x.All())
	})
	ds := s.session(t, g, 3, 2)
	ctl := capability[device.Controller](t, ds)
	ops := loop.Control.Body.Ops
	require.Len(t, ops, 4)
	run := func(stream int, op *dag.Op) device.Step {
		return device.Step{Kind: device.RunStep, Stream: stream, Op: op}
	}
	require.NoError(t, ctl.SetBodies(loop, [][]device.Step{{
		run(1, ops[0]), // the entry stream
		{Kind: device.RecordStep, Stream: 1, Event: 0},
		{Kind: device.WaitStep, Stream: 2, Event: 0},
		run(2, ops[1]),
		run(2, ops[2]),
		{Kind: device.RecordStep, Stream: 2, Event: 1},
		{Kind: device.WaitStep, Stream: 1, Event: 1},
		run(1, ops[3]),
	}}))
	require.NoError(t, ds.Run(0, loop))
	require.NoError(t, ds.Run(0, cp))
	require.NoError(t, s.sync(t, ds))
	// x halves until its sum, 4x, is at most 0.3: four passes.
	assert.Equal(t, repeat(0.0625, 4), readF32(t, ds, x))
	assert.Equal(t, []float32{0.25}, readF32(t, ds, sum))
	assert.Equal(t, repeat(0.0625, 4), readF32(t, ds, out), "the copy after the loop follows its last pass")
	data, err := ds.Read(flag)
	require.NoError(t, err)
	assert.Zero(t, binary.LittleEndian.Uint32(data), "the flag the last pass cleared")
}

// loopMax: a loop whose flag stays set fails once it has run its Max
// passes, with a *dag.OpError naming the loop.
func (s *suite) loopMax(t *testing.T) {
	var x, flag *dag.Buffer
	var loop *dag.Op
	g := build(t, func(b *dag.Builder) {
		x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		flag = b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Value(1))
		loop = b.While(flag.All(), func(body *dag.Builder) {
			body.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
		}, dag.Name("forever"), dag.AtMost(3))
	})
	ds := s.session(t, g, 2, 0)
	ctl := capability[device.Controller](t, ds)
	require.NoError(t, ctl.SetBodies(loop, [][]device.Step{{{Kind: device.RunStep, Stream: 1, Op: loop.Control.Body.Ops[0]}}}))
	require.NoError(t, ds.Run(0, loop))
	err := s.sync(t, ds)
	require.Error(t, err)
	oe, ok := errors.AsType[*dag.OpError](err)
	require.True(t, ok, "Sync's error %v is a *dag.OpError", err)
	assert.Equal(t, "forever", oe.Op)
	assert.Equal(t, repeat(8, 4), readF32(t, ds, x), "three passes ran")
}

// loopMaxReplayed: a captured loop whose flag stays set fails each replay
// once it has run its Max passes, as an eager run does, with a
// *dag.OpError naming the loop: the replay's Sync reports it, and so does
// the next replay's. It holds for a body that ends in a set_flag of the
// loop's own flag (dag.Op.CondSetter), which the cuda backend runs as the
// kernel that also ends the iteration, and for one that does not, and
// both when the device session is driven call by call and when the
// executor captures the plan (Session.Capture, Graph.Run).
func (s *suite) loopMaxReplayed(t *testing.T) {
	for _, setter := range []bool{false, true} {
		name := "condition kernel"
		if setter {
			name = "set_flag last"
		}
		t.Run(name, func(t *testing.T) {
			var x, flag *dag.Buffer
			var loop *dag.Op
			g := build(t, func(b *dag.Builder) {
				x = b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
				flag = b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Value(1))
				loop = b.While(flag.All(), func(body *dag.Builder) {
					body.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
					if setter { // x stays above the threshold: the flag stays set
						body.Launch(dag.SetFlag, one, one, dag.Out(flag.All()), dag.In(x.Slice(0, 4)), 0.5)
					}
				}, dag.Name("forever"), dag.AtMost(3))
			})
			require.Equal(t, setter, loop.CondSetter() != nil, "dag.Op.CondSetter")
			checkErr := func(err error, what string) {
				t.Helper()
				require.Error(t, err, "%s: the loop reached its max with its flag set", what)
				oe, ok := errors.AsType[*dag.OpError](err)
				require.True(t, ok, "%s: Sync's error %v is a *dag.OpError", what, err)
				assert.Equal(t, "forever", oe.Op, what)
				assert.ErrorContains(t, err, loop.Control.MaxReached().Error(), what)
			}

			t.Run("device", func(t *testing.T) {
				ds := s.session(t, g, 2, 0)
				ctl := capability[device.Controller](t, ds)
				c := capability[device.Capturer](t, ds)
				var steps []device.Step
				for _, op := range loop.Control.Body.Ops {
					steps = append(steps, device.Step{Kind: device.RunStep, Stream: 1, Op: op})
				}
				require.NoError(t, ctl.SetBodies(loop, [][]device.Step{steps}))
				require.NoError(t, c.BeginCapture(0))
				require.NoError(t, ds.Run(0, loop))
				id, err := c.EndCapture(0)
				require.NoError(t, err)
				require.NoError(t, s.sync(t, ds), "a capture runs nothing")
				require.NoError(t, c.Instantiate(id))
				for i, want := range []float32{8, 64} {
					require.NoError(t, c.LaunchGraph(id, 0))
					checkErr(s.sync(t, ds), fmt.Sprintf("replay %d", i+1))
					assert.Equal(t, repeat(want, 4), readF32(t, ds, x), "replay %d: three passes ran", i+1)
				}
				require.NoError(t, c.DestroyGraph(id))
			})

			t.Run("executor", func(t *testing.T) {
				p, err := planner.New(g)
				require.NoError(t, err)
				b := s.backend(t, s.open)
				ctx := s.ctx(t)
				es, err := executor.Open(ctx, b, p)
				skipUnsupported(t, err)
				require.NoError(t, err)
				defer func() { require.NoError(t, es.Close()) }()
				capability[device.Capturer](t, es.Device())
				gr, err := es.Capture(ctx)
				require.NoError(t, err)
				for i := range 2 {
					checkErr(gr.Run(ctx), fmt.Sprintf("replay %d", i+1))
				}
				require.NoError(t, gr.Close())
			})
		})
	}
}
