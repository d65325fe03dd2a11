package planner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/verify"
)

// waitsBefore is, by op name, how many waits p's stream makes right before
// the op runs.
func waitsBefore(p *planner.Plan) map[string]int {
	n := map[string]int{}
	pending := map[int32]int{}
	for _, st := range p.Steps {
		switch st.Kind {
		case planner.Wait:
			pending[st.Stream]++
		case planner.Run:
			n[p.Graph.Ops[st.Op].Name] = pending[st.Stream]
			pending[st.Stream] = 0
		}
	}
	return n
}

// The gather pass moves the wait of a chunk's second GEMM (for the
// download that read its output buffer two chunks before) up to the
// chunk's first GEMM, which waits for its upload anyway, where the cost
// model has the download done: the second GEMM then follows the first
// with no wait between. The plan stays ordered and verified.
func TestGatherWaits(t *testing.T) {
	g := mlpChunks(t, 1024, 8, time.Microsecond)
	p := mustPlan(t, g, planner.Split(planner.SplitNone), planner.Fuse(planner.FuseNone), planner.Verify())
	require.NoError(t, verify.Verify(p))
	before := waitsBefore(p)
	for c := 2; c < 8; c++ {
		assert.Zero(t, before[fmt.Sprintf("fc2_%d", c)], "fc2_%d follows its chunk's gelu with no wait", c)
		assert.Equal(t, 2, before[fmt.Sprintf("fc1_%d", c)], "fc1_%d waits for its upload and for the download of two chunks before", c)
	}
	var summary string
	for _, r := range p.Passes {
		if r.Name == "gather" {
			summary = r.Summary
		}
	}
	assert.Regexp(t, `^\d+ waits moved up to an earlier one`, summary)
}

// A wait whose event the cost model has reached only later stays where
// it is: moved up, it would hold the op it joins. Here b waits for slow,
// which runs 1 ms, and a before it waits for fast producers.
func TestGatherWaitsOnlyWhatIsDone(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		bufs := make([]*dag.Buffer, 5)
		for i := range bufs {
			bufs[i] = b.Array(fmt.Sprintf("b%d", i), dag.F32, 1024, dag.OnDevice(0), dag.Zeros())
		}
		scale := func(name string, prio dag.Priority, cost time.Duration, out *dag.Buffer, after ...*dag.Op) *dag.Op {
			return b.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), out, 2.0, dag.Name(name), prio, dag.Cost(cost), dag.After(after...))
		}
		// Priorities keep fast2, slow and the rest on streams of their own.
		fast1 := scale("fast1", dag.Normal, time.Microsecond, bufs[0])
		fast2 := scale("fast2", dag.Low, time.Microsecond, bufs[1])
		slow := scale("slow", dag.High, time.Millisecond, bufs[2])
		a := scale("a", dag.Normal, 10*time.Microsecond, bufs[3], fast1, fast2)
		scale("b", dag.Normal, 10*time.Microsecond, bufs[4], a, slow)
	})
	p := mustPlan(t, g, planner.Streams(1), planner.Verify())
	before := waitsBefore(p)
	require.Positive(t, before["a"], "a waits for a producer on another stream")
	assert.Positive(t, before["b"], "b still waits for slow")
}

// GatherNone leaves the waits where the events pass put them, and an
// unknown gathering is refused by name.
func TestGatherNone(t *testing.T) {
	g := mlpChunks(t, 1024, 8, time.Microsecond)
	p := mustPlan(t, g, planner.Split(planner.SplitNone), planner.Fuse(planner.FuseNone), planner.Gather(planner.GatherNone))
	for _, r := range p.Passes {
		assert.NotEqual(t, "gather", r.Name)
	}
	before := waitsBefore(p)
	for c := 2; c < 8; c++ {
		assert.Equal(t, 1, before[fmt.Sprintf("fc2_%d", c)], "fc2_%d waits for the download of two chunks before", c)
	}
	assert.Equal(t, "none", planner.GatherNone.String())
	_, err := planner.New(g, planner.Gather(planner.Gathering(9)))
	assert.ErrorContains(t, err, "unknown gathering 9")
}

// Over random graphs, eager and replayed, a gathered plan is verified and
// its estimate is never above the same plan's ungathered: a wait moves
// only where its event is reached before the op it joins starts. Eagerly,
// a moved wait is submitted sooner, and the host's cost of it may then
// hold back the submission of other streams' ops in between: by at most
// that cost a wait.
func TestGatherNeverSlower(t *testing.T) {
	hostWait := perf.OverheadsOf(perf.DefaultCost()).Wait
	for seed := range int64(60) {
		cfg := dagtest.Config{Ops: 80, Buffers: 4 + int(seed)%6, Seed: seed, Ranges: seed%2 == 0, Priorities: seed%3 == 0,
			Temporaries: seed%4 != 0, HostBuffers: true, Devices: 1 + int(seed)%2}
		g := dagtest.Random(cfg)
		for _, mode := range []planner.Mode{planner.Eager, planner.Replay} {
			opts := []planner.Option{planner.Streams(1 + int(seed)%5), planner.ForMode(mode)}
			on := mustPlan(t, g, append(opts, planner.Verify())...)
			off := mustPlan(t, g, append(opts, planner.Gather(planner.GatherNone))...)
			slack := time.Duration(0)
			if mode == planner.Eager {
				slack = time.Duration(off.Stats.Waits) * hostWait
			}
			assert.LessOrEqual(t, on.Stats.Makespan, off.Stats.Makespan+slack, "seed %d, %v", seed, mode)
			assert.LessOrEqual(t, on.Stats.Waits, off.Stats.Waits, "seed %d, %v", seed, mode)
		}
	}
}
