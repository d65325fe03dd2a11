package cpu_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

func f32Bytes(vs ...float32) []byte {
	out := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func build(t testing.TB, declare func(b *dag.Builder)) *dag.Graph {
	t.Helper()
	b := dag.New()
	declare(b)
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

func plan(t testing.TB, g *dag.Graph, streams int) *planner.Plan {
	t.Helper()
	p, err := planner.New(g, planner.Streams(streams))
	require.NoError(t, err)
	return p
}

// execute runs p once on a new cpu backend and returns every persistent
// buffer's contents by name.
func execute(t testing.TB, p *planner.Plan, opts ...cpu.Option) map[string][]byte {
	t.Helper()
	out, err := executor.Execute(context.Background(), cpu.New(opts...), p)
	require.NoError(t, err)
	byName := make(map[string][]byte, len(out))
	for b, data := range out {
		byName[b.Name] = data
	}
	return byName
}

// handPlan plans g onto n streams, putting op i on stream streamOf(op),
// with a record after every op that an op of another stream depends on
// and a wait before every such dependent: no wait is left out, so every
// cross-stream hazard is guarded by its own event.
func handPlan(t testing.TB, g *dag.Graph, n int, streamOf func(op *dag.Op) int) *planner.Plan {
	t.Helper()
	p := &planner.Plan{Graph: g, OpStream: make([]int32, len(g.Ops))}
	for i := range n {
		p.Streams = append(p.Streams, planner.Stream{ID: i, Name: fmt.Sprintf("s%d", i)})
	}
	for _, op := range g.Ops {
		p.OpStream[op.ID] = int32(streamOf(op))
	}
	eventAfter := make(map[int32]int32)
	for _, op := range g.Ops {
		for _, d := range op.Deps {
			if _, ok := eventAfter[d]; !ok && p.OpStream[d] != p.OpStream[op.ID] {
				eventAfter[d] = int32(p.Events)
				p.Events++
			}
		}
	}
	for _, op := range g.Ops {
		id, s := int32(op.ID), p.OpStream[op.ID]
		for _, d := range op.Deps {
			if e, ok := eventAfter[d]; ok && p.OpStream[d] != s {
				p.Steps = append(p.Steps, planner.Step{Kind: planner.Wait, Stream: s, Op: id, Event: e})
			}
		}
		p.Steps = append(p.Steps, planner.Step{Kind: planner.Run, Stream: s, Op: id, Event: -1})
		if e, ok := eventAfter[id]; ok {
			p.Steps = append(p.Steps, planner.Step{Kind: planner.Record, Stream: s, Op: id, Event: e})
		}
	}
	require.NoError(t, verify.Verify(p))
	return p
}

// requireNoLeak fails unless the goroutine count drops back to before,
// allowing the runtime a moment to retire exiting goroutines.
func requireNoLeak(t *testing.T, before int) {
	t.Helper()
	var now int
	for range 200 {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("%d goroutines after Close, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
}

// openSession opens a session of g on be, closed when the test ends.
func openSession(t testing.TB, be *cpu.Backend, g *dag.Graph) *cpu.Session {
	t.Helper()
	s, err := be.OpenSession(context.Background(), g)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
