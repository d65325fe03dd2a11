//go:build cgo

package cuda

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor/device"
)

// TestCUPTIFake drives the binding against testdata/cupti_fake.c, built as
// a stand-in libcupti.so.13: the buffer callbacks, parsing, correlation and
// dropped counts on any machine with a C compiler, and the version and busy
// refusals that a real CUPTI gives only in particular setups.
func TestCUPTIFake(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	lib := filepath.Join(t.TempDir(), "libcupti.so.13")
	out, err := exec.Command(cc, "-Wall", "-shared", "-fPIC", "-o", lib, filepath.Join("testdata", "cupti_fake.c")).CombinedOutput()
	require.NoError(t, err, "building the fake CUPTI:\n%s", out)

	t.Run("old version", func(t *testing.T) {
		t.Setenv("FAKE_CUPTI", "old")
		_, err := newActivityTracer([]string{lib})
		var ve *CUPTIVersionError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, uint32(120000), ve.Version)
		assert.ErrorIs(t, err, ErrNoCUPTI)
	})
	t.Run("busy", func(t *testing.T) {
		t.Setenv("FAKE_CUPTI", "busy")
		_, err := newActivityTracer([]string{lib})
		assert.ErrorIs(t, err, ErrCUPTIBusy)
		assert.ErrorContains(t, err, "fake: another subscriber")
	})
	// The default tracer names launches by the driver callback alone: an
	// op's push and pop stay in dagrun, so the fake, which answers pushes
	// with records, sees none.
	t.Run("pushes stay in dagrun", func(t *testing.T) {
		t.Setenv("FAKE_CUPTI", "")
		tr, err := newActivityTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		for _, op := range []int{3, 5} {
			require.NoError(t, tr.tracedCall(op, func() error { return nil }))
		}
		assert.Error(t, tr.popOp(), "nothing pushed")
		recs, err := tr.flush()
		require.NoError(t, err)
		assert.Empty(t, recs)
		assert.False(t, tr.enabled(activityExternal))
	})
	t.Run("records", func(t *testing.T) {
		t.Setenv("FAKE_CUPTI", "")
		tr, err := newExternalTracer([]string{lib})
		require.NoError(t, err)
		assert.Equal(t, lib, tr.path)
		for _, op := range []int{3, 5, 8} {
			require.NoError(t, tr.tracedCall(op, func() error { return nil }))
		}
		assert.Error(t, tr.popOp(), "nothing pushed")
		assert.Error(t, tr.pushOp(-1))
		recs, err := tr.flush()
		require.NoError(t, err)
		require.Len(t, recs, 3)
		for i, op := range []int64{3, 5, 8} {
			assert.Equal(t, activityRecord{Kind: activityKernel, Op: op, Correlation: uint32(i + 1), Stream: 7,
				Start: uint64(1000 * op), End: uint64(1000*op + 500), Replay: -1}, recs[i])
		}
		assert.Equal(t, uint64(3), tr.dropped())
		assert.Equal(t, uint64(3), tr.cuptiDropped())
		assert.Zero(t, tr.lost())
		st := tr.stats()
		assert.Equal(t, uint64(1), st.Buffers)
		// Three correlation records (24 bytes) and three kernel records (216).
		assert.Equal(t, []bufferDrop{{Records: 6, Dropped: 3, Valid: 3 * (24 + 216)}}, st.Drops)
		recs, err = tr.flush()
		require.NoError(t, err)
		assert.Empty(t, recs)

		_, err = newExternalTracer([]string{lib})
		assert.ErrorIs(t, err, ErrCUPTIBusy, "one tracer per process")
		require.NoError(t, tr.close())
		require.NoError(t, tr.close(), "closing twice is harmless")

		again, err := newExternalTracer([]string{lib})
		require.NoError(t, err, "the sink is free once the tracer closes")
		require.NoError(t, again.close())
	})
	// A session's collect forces a flush only where the default one left
	// an awaited op without its record; the record that comes then is
	// named by the correlation the default flush brought.
	t.Run("collect", func(t *testing.T) {
		for _, tc := range []struct {
			mode   string
			forced int
		}{{"", 0}, {"partial", 1}} {
			t.Setenv("FAKE_CUPTI", tc.mode)
			tr, err := newExternalTracer([]string{lib})
			require.NoError(t, err)
			c := &cuptiTiming{tr: tr}
			for _, op := range []int{3, 5, 8} {
				require.NoError(t, tr.tracedCall(op, func() error { return nil }))
				c.ops = append(c.ops, cuptiOp{op: op, stream: 1, expect: true})
				c.setStream(op, 1)
			}
			recs, err := c.collect()
			require.NoError(t, err)
			var ops []int64
			for _, r := range recs {
				ops = append(ops, r.Op)
			}
			assert.Equal(t, []int64{3, 5, 8}, ops, "mode %q: every op's record, named", tc.mode)
			assert.Equal(t, tc.forced, c.forced, "mode %q: flushes forced", tc.mode)
			// The fake refuses a flush into a buffer that is not zeroed, as
			// the sink told it its buffers are: the second flush (forced,
			// or the next run's) reuses the first one's buffer.
			for _, op := range []int{1, 2} {
				require.NoError(t, tr.tracedCall(op, func() error { return nil }))
			}
			_, err = tr.flush()
			require.NoError(t, err, "mode %q: a recycled buffer comes zeroed", tc.mode)
			st := tr.stats()
			assert.True(t, st.Zeroed, "the fake took the sink's word")
			assert.Less(t, st.Fresh, st.Requests, "buffers are recycled")
			require.NoError(t, tr.close())
		}
	})
	t.Run("graph nodes", func(t *testing.T) {
		// Records of replayed nodes, named by the op pushed while each node
		// was made, and by nothing else.
		t.Setenv("FAKE_CUPTI", "nodes")
		tr, err := newExternalTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		for _, op := range []int{6, 2} {
			require.NoError(t, tr.tracedCall(op, func() error { return nil }))
		}
		recs, err := tr.flush()
		require.NoError(t, err)
		require.Len(t, recs, 2)
		assert.Equal(t, []int64{6, 2}, []int64{recs[0].Op, recs[1].Op})
		assert.Equal(t, []uint64{1006, 1002}, []uint64{recs[0].GraphNodeID, recs[1].GraphNodeID})
		assert.Zero(t, tr.linked)
	})
	t.Run("dropped before the tracer", func(t *testing.T) {
		// What CUPTI counted while no tracer gave buffers is drained at
		// the start, apart from the tracer's own drops.
		t.Setenv("FAKE_CUPTI", "predropped")
		tr, err := newExternalTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		require.NoError(t, tr.tracedCall(1, func() error { return nil }))
		_, err = tr.flush()
		require.NoError(t, err)
		st := tr.stats()
		assert.Equal(t, uint64(5), st.DroppedBefore)
		assert.Equal(t, uint64(3), tr.dropped(), "only the tracer's own: %v", st)
	})
	t.Run("replay markers", func(t *testing.T) {
		// A marker pushed around a launch (as LaunchGraph pushes it) names
		// the replay of the launch's records, through the driver callback
		// alone or CUPTI's external correlation records.
		for _, mode := range []string{"", "callbacks"} {
			t.Setenv("FAKE_CUPTI", mode)
			tr, err := newExternalTracer([]string{lib})
			require.NoError(t, err)
			for _, id := range []int{replayMarker, 4, replayMarker + 1} {
				require.NoError(t, tr.tracedCall(id, func() error { return nil }))
			}
			recs, err := tr.flush()
			require.NoError(t, err)
			require.Len(t, recs, 3)
			var got [][2]int64
			for _, r := range recs {
				got = append(got, [2]int64{r.Op, r.Replay})
			}
			assert.Equal(t, [][2]int64{{-1, 0}, {4, -1}, {-1, 1}}, got, "mode %q: (op, replay) of each record", mode)
			require.NoError(t, tr.close())
		}
	})
	t.Run("replay spans", func(t *testing.T) {
		// Ops 3 and 5 captured (a node made under each), then three
		// replays launched back to back under their markers, as
		// LaunchGraph marks them, and read in one flush: each replay's
		// spans apart, named by the captured nodes' ops, measured from the
		// first record (no origin was taken).
		t.Setenv("FAKE_CUPTI", "replays")
		tr, err := newExternalTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		for _, op := range []int{3, 5} {
			require.NoError(t, tr.tracedCall(op, func() error { return nil }))
		}
		for r := range 3 {
			require.NoError(t, tr.tracedCall(replayMarker+r, func() error { return nil }))
		}
		se := joined(&Session{})
		se.tim.cupti = &cuptiTiming{tr: tr}
		se.tim.cupti.setStream(3, 0)
		se.tim.cupti.setStream(5, 1)
		require.True(t, se.tim.TimesReplays())
		type span struct {
			replay, op, stream int
			start, end         time.Duration
		}
		var got []span
		require.NoError(t, se.tim.ReplaySpans(func(replay, op, stream int, start, end time.Duration) {
			got = append(got, span{replay, op, stream, start, end})
		}))
		assert.Equal(t, []span{
			{0, 3, 0, 0, 50}, {0, 5, 1, 100, 150},
			{1, 3, 0, 10000, 10050}, {1, 5, 1, 10100, 10150},
			{2, 3, 0, 20000, 20050}, {2, 5, 1, 20100, 20150},
		}, got)
		assert.Zero(t, se.tim.cupti.unmarked)
		assert.Zero(t, se.tim.cupti.unnamed)
	})
	t.Run("whole replays", func(t *testing.T) {
		// A whole-graph tracer enables graph-launch records and external
		// correlation, no kernel records; each replay's graph-launch
		// record, named through the cuGraphLaunch callback, is one span of
		// op -1 on the launch's stream. Spans drops them.
		t.Setenv("FAKE_CUPTI", "graphs")
		tr, err := newGraphLevelTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		var kinds []activityKind
		for _, k := range tr.kinds {
			kinds = append(kinds, activityKind(k))
		}
		assert.Equal(t, []activityKind{activityGraphLaunch, activityExternal}, kinds)
		assert.False(t, tr.enabled(activityKernel))
		se := joined(&Session{})
		se.tim.timing, se.tim.cupti = true, &cuptiTiming{tr: tr, whole: true}
		src, why, _ := se.tim.TimingSource()
		assert.Equal(t, device.TimingCUPTIGraph, src)
		assert.False(t, se.tim.tracesOps(), "eager ops are timed by events")
		assert.True(t, se.tim.TimesReplays())
		launch := func(seq, stream int) {
			c := se.tim.cupti
			if len(c.launchStreams) == 0 {
				c.launchBase = seq
			}
			c.launchStreams = append(c.launchStreams, int32(stream))
			require.NoError(t, tr.tracedCall(replayMarker+seq, func() error { return nil }))
		}
		require.NoError(t, tr.tracedCall(4, func() error { return nil })) // an eager op: no record
		for r := range 3 {
			launch(r, 2)
		}
		type span struct {
			replay, op, stream int
			start, end         time.Duration
		}
		var got []span
		require.NoError(t, se.tim.ReplaySpans(func(replay, op, stream int, start, end time.Duration) {
			got = append(got, span{replay, op, stream, start, end})
		}))
		assert.Equal(t, []span{{0, -1, 2, 0, 5000}, {1, -1, 2, 10000, 15000}, {2, -1, 2, 20000, 25000}}, got, "timing: %s", why)
		assert.Zero(t, se.tim.cupti.unmarked)
		assert.Zero(t, se.tim.cupti.unnamed)

		launch(3, 1)
		n := 0
		require.NoError(t, se.tim.Spans(func(int, int, time.Duration, time.Duration) { n++ }))
		assert.Zero(t, n, "Spans gives no replay")
		require.NoError(t, se.tim.ReplaySpans(func(int, int, int, time.Duration, time.Duration) { n++ }))
		assert.Zero(t, n, "Spans dropped the replay's record")
	})
	t.Run("callbacks only", func(t *testing.T) {
		// No external correlation records: launches are named by the driver
		// callback's correlation id alone.
		t.Setenv("FAKE_CUPTI", "callbacks")
		tr, err := newExternalTracer([]string{lib})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.close()) }()
		for _, op := range []int{4, 9} {
			require.NoError(t, tr.tracedCall(op, func() error { return nil }))
		}
		recs, err := tr.flush()
		require.NoError(t, err)
		require.Len(t, recs, 2)
		assert.Equal(t, []int64{4, 9}, []int64{recs[0].Op, recs[1].Op})
		assert.Equal(t, uint64(2), tr.linked)
		assert.Zero(t, tr.externals)
	})
}
