//go:build cgo

package cuda

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// TestCUPTIGraphLevel replays a captured graph with the whole-graph tracer:
// one graph-launch record per replay, named by the op pushed around the
// launches, and no other record (no kernel's).
func TestCUPTIGraphLevel(t *testing.T) {
	b := gpuBackend(t)
	tr, err := newGraphLevelTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		requireGPU(t, "no CUPTI: %v", err)
	}
	defer func() { assert.NoError(t, tr.close()) }()
	if !tr.enabled(activityGraphLaunch) {
		t.Skipf("CUPTI %d gives no graph-launch records", tr.version)
	}
	defer openSession(t, b, chains(1, 1, dag.Spin, 5, false)).Close()
	const nstreams, rounds, replays = 2, 3, 3
	raw, err := newRawLoop(b, nstreams, dag.Normal, dag.Spin, 5)
	require.NoError(t, err)
	defer raw.close()
	rg, err := newRawGraph(raw, rounds)
	require.NoError(t, err)
	defer rg.close()
	require.NoError(t, tr.tracedCall(700, func() error { return rg.launches(replays) }))
	recs, err := tr.flush()
	require.NoError(t, err)
	launches, others := 0, 0
	for _, r := range recs {
		if r.Kind == activityGraphLaunch {
			assert.Equal(t, int64(700), r.Op)
			// rounds spins of 5 us in a row on each stream.
			assert.GreaterOrEqual(t, r.End-r.Start, uint64(rounds*4000))
			launches++
		} else {
			others++
		}
	}
	assert.Equal(t, replays, launches, "records %+v", recs)
	assert.Zero(t, others, "only graph-launch records: kinds enabled %v", tr.kinds)
	t.Logf("%d records; launches named by callback %d, by external correlation %d", len(recs), tr.linked, tr.externals)
}

// TestCUPTISpansGathering: the replays' records are gathered into one span
// per replay and op, the same by the table and by sorting (replays too
// far apart for the table), eager ops first in submission order; records of
// ops the session never ran are counted as unnamed.
func TestCUPTISpansGathering(t *testing.T) {
	rec := func(replay, op int64, start, end uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Replay: replay, Op: op, Start: start, End: end, GraphNodeID: uint64(op + 1)}
	}
	eager := func(op int64, start, end uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Replay: -1, Op: op, Start: start, End: end}
	}
	recs := []activityRecord{
		rec(6, 1, 260, 270), eager(2, 110, 120), rec(5, 0, 200, 210), rec(5, 1, 205, 215), rec(6, 0, 250, 255),
		rec(5, 0, 211, 230),                     // a second kernel of op 0 in replay 5
		eager(0, 100, 105), rec(6, 9, 300, 301), // op 9 never ran here
	}
	type span struct {
		replay, op, stream int
		start, end         time.Duration
	}
	want := []span{
		{-1, 2, 1, 10, 20}, {-1, 0, 0, 0, 5},
		{5, 0, 0, 100, 130}, {5, 1, 1, 105, 115},
		{6, 0, 0, 150, 155}, {6, 1, 1, 160, 170},
	}
	for _, tc := range []struct {
		name     string
		maxCells int
	}{{"table", 1 << 10}, {"sorted", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cuptiTiming{origin: 100, ops: []cuptiOp{{op: 2, stream: 1}, {op: 0, stream: 0}}}
			c.setStream(0, 0)
			c.setStream(1, 1)
			c.setStream(2, 1)
			var got []span
			c.spans(slices.Clone(recs), tc.maxCells, func(replay, op, stream int, start, end time.Duration) {
				got = append(got, span{replay, op, stream, start, end})
			})
			assert.Equal(t, want, got)
			assert.Equal(t, 1, c.unnamed)
			assert.Zero(t, c.unmarked)
		})
	}
}

// The package's timing sources are device's, untyped.
func TestTimingSources(t *testing.T) {
	assert.Equal(t, []device.TimingSource{device.TimingAuto, device.TimingCUPTI, device.TimingEvents, device.TimingCUPTIGraph},
		[]device.TimingSource{TimingAuto, TimingCUPTI, TimingEvents, TimingCUPTIGraph})
}
