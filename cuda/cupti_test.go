//go:build cgo

package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

func TestCUPTICandidates(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "libcupti.so.13")
	tests := []struct {
		name, env, first string
	}{
		{"no override", "", "libcupti.so.13"},
		{"a folder", dir, file},
		{"a file", "/x/libcupti.so", "/x/libcupti.so"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cuptiCandidates(tc.env)
			require.NotEmpty(t, c)
			assert.Equal(t, tc.first, c[0])
			assert.Contains(t, c, "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13")
			assert.Contains(t, c, "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13")
		})
	}
}

func TestCUPTIMissing(t *testing.T) {
	_, err := newActivityTracer([]string{filepath.Join(t.TempDir(), "libcupti.so.13")})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoCUPTI)
	assert.NotErrorIs(t, err, ErrCUPTIBusy)
	assert.Contains(t, err.Error(), "DAGRUN_CUPTI")
}

func TestCUPTIErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		busy, none bool
		text       string
	}{
		{"multiple subscribers", &CUPTIError{Call: "cuptiActivityEnable", Kind: 10, Code: 39, Msg: "only one subscriber"}, true, false,
			"cuptiActivityEnable(kind 10): only one subscriber (39)"},
		{"hardware busy", &CUPTIError{Call: "cuptiActivityRegisterCallbacks", Code: 26}, true, false,
			"cuptiActivityRegisterCallbacks: CUptiResult (26)"},
		{"old profiler", &CUPTIError{Call: "cuptiActivityEnable", Code: 36}, true, false, "(36)"},
		{"our sink", &CUPTIError{Call: "dagrun's CUPTI sink", Code: -1}, true, false, "sink"},
		{"not supported", &CUPTIError{Call: "cuptiActivityEnable", Code: 27}, false, false, "(27)"},
		{"unknown version", &CUPTIVersionError{Path: "/l/libcupti.so.13", Version: 130100, Min: 130000, Max: 130001}, false, true,
			"/l/libcupti.so.13 is CUPTI API version 130100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.busy, errors.Is(tc.err, ErrCUPTIBusy))
			assert.Equal(t, tc.none, errors.Is(tc.err, ErrNoCUPTI))
			assert.Contains(t, tc.err.Error(), tc.text)
		})
	}
}

func TestResolveRecords(t *testing.T) {
	ext := func(corr uint32, op int64) activityRecord {
		return activityRecord{Kind: activityExternal, Correlation: corr, Op: op}
	}
	timed := func(k activityKind, corr uint32) activityRecord {
		return activityRecord{Kind: k, Correlation: corr, Start: 10, End: 20}
	}
	tests := []struct {
		name     string
		flushes  [][]activityRecord
		wantOps  [][]int64 // per flush, the Op of each record returned
		wantKept int       // correlations still waiting at the end
	}{
		{"same flush", [][]activityRecord{{ext(1, 7), timed(activityKernel, 1), ext(2, 8), timed(activityMemcpy, 2)}},
			[][]int64{{7, 8}}, 0},
		{"record before its correlation", [][]activityRecord{{timed(activityMemset, 3), ext(3, 0)}},
			[][]int64{{0}}, 0},
		{"no correlation", [][]activityRecord{{timed(activityKernel, 4)}}, [][]int64{{-1}}, 0},
		{"correlation in an earlier flush", [][]activityRecord{{ext(5, 9)}, {timed(activityKernel, 5)}},
			[][]int64{{}, {9}}, 0},
		{"a graph launch names every node", [][]activityRecord{{ext(6, 3), timed(activityKernel, 6), timed(activityKernel, 6),
			timed(activityGraphLaunch, 6)}}, [][]int64{{3, 3, 3}}, 0},
		{"unclaimed correlations wait", [][]activityRecord{{ext(7, 1), ext(8, 2), timed(activityKernel, 8)}},
			[][]int64{{2}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept := newCorrelations()
			for i, in := range tc.flushes {
				got := resolveRecords(in, kept, nil, nil)
				ops := []int64{}
				for _, r := range got {
					assert.NotEqual(t, activityExternal, r.Kind)
					ops = append(ops, r.Op)
				}
				assert.Equal(t, tc.wantOps[i], ops, "flush %d", i)
			}
			assert.Equal(t, tc.wantKept, kept.pending())
		})
	}
}

func TestResolveGraphNodes(t *testing.T) {
	clones := map[uint64]uint64{11: 1, 12: 2, 21: 11, 30: 30} // 21 is a clone of a clone; 30 a cycle
	in := []activityRecord{
		{Kind: activityKernel, GraphNodeID: 11},
		{Kind: activityKernel, GraphNodeID: 21},
		{Kind: activityMemset, GraphNodeID: 2},  // already a captured node
		{Kind: activityKernel, GraphNodeID: 0},  // not from a graph
		{Kind: activityKernel, GraphNodeID: 30}, // ends
	}
	nodeOps := map[uint64]int64{1: 7, 2: 8}
	var got []uint64
	var ops []int64
	for _, r := range resolveRecords(in, newCorrelations(), clones, nodeOps) {
		got = append(got, r.GraphNodeID)
		ops = append(ops, r.Op)
	}
	assert.Equal(t, []uint64{1, 1, 2, 0, 30}, got)
	assert.Equal(t, []int64{7, 7, 8, -1, -1}, ops, "replayed nodes named by the ops their captured nodes were made under")
}

// TestResolveReplayMarkers: a marker pushed around a graph launch names
// the replay of every record of the launch that comes in the flush that
// claims its correlation (the one after the replay is synchronised) or in
// one before, while the captured nodes name the ops; an unmarked launch's
// records have replay -1.
func TestResolveReplayMarkers(t *testing.T) {
	ext := func(corr uint32, id int64) activityRecord {
		return activityRecord{Kind: activityExternal, Correlation: corr, Op: id}
	}
	node := func(corr uint32, node uint64) activityRecord {
		return activityRecord{Kind: activityKernel, Correlation: corr, GraphNodeID: node, Start: 10, End: 20}
	}
	nodeOps := map[uint64]int64{1: 7, 2: 8}
	kept := newCorrelations()
	flushes := [][]activityRecord{
		{ext(1, replayMarker), node(1, 1), node(1, 2), ext(2, replayMarker+1), node(2, 2)},
		{ext(3, replayMarker+2)},
		{node(3, 1), node(4, 2), node(3, 2)},
	}
	type got struct{ op, replay int64 }
	want := [][]got{
		{{7, 0}, {8, 0}, {8, 1}},
		nil,
		{{7, 2}, {8, -1}, {8, 2}},
	}
	for i, in := range flushes {
		var g []got
		for _, r := range resolveRecords(in, kept, nil, nodeOps) {
			g = append(g, got{r.Op, r.Replay})
		}
		assert.Equal(t, want[i], g, "flush %d", i)
	}
}

// requireGPU skips with why, or fails when DAGRUN_REQUIRE_GPU=1.
func requireGPU(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("DAGRUN_REQUIRE_GPU") == "1" {
		t.Fatalf("DAGRUN_REQUIRE_GPU=1, but: "+why, args...)
	}
	t.Skipf(why, args...)
}

// TestCUPTILayouts compiles testdata/cupti_check.c against the real CUPTI
// headers and runs it: every size, offset and value cupti.h declares must
// match them.
func TestCUPTILayouts(t *testing.T) {
	// CUPTI's headers are beside the toolkit's, or in extras/CUPTI; cuda.h
	// is always the toolkit's.
	// DAGRUN_CUPTI_INCLUDE, a list of folders like PATH, comes first.
	dirs := []string{"/usr/local/cuda/include", "/usr/local/cuda/extras/CUPTI/include"}
	if env := os.Getenv("DAGRUN_CUPTI_INCLUDE"); env != "" {
		dirs = append(filepath.SplitList(env), dirs...)
	}
	inc := ""
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "cupti_activity.h")); err == nil {
			inc = d
			break
		}
	}
	if inc == "" {
		requireGPU(t, "no CUPTI headers in %v (set DAGRUN_CUPTI_INCLUDE)", dirs)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		requireGPU(t, "no C compiler: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "cupti_check")
	args := []string{"-Wall", "-o", bin, filepath.Join("testdata", "cupti_check.c")}
	for _, d := range dirs {
		args = append(args, "-I"+d)
	}
	out, err := exec.Command(cc, args...).CombinedOutput()
	require.NoError(t, err, "compiling cupti_check.c:\n%s", out)
	out, err = exec.Command(bin).CombinedOutput()
	t.Logf("%s", out)
	var mismatches []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "MISMATCH") {
			mismatches = append(mismatches, line)
		}
	}
	assert.Empty(t, mismatches)
	require.NoError(t, err, "cupti_check found layouts that differ from cupti.h")
	assert.Contains(t, string(out), "ok sizeof(CUpti_ActivityKernel10) = 216")
}

// TestCUPTIRecords records kernels, copies and fills with the binding and
// checks each arrives once, named by the op pushed around it, with sane
// timestamps.
func TestCUPTIRecords(t *testing.T) {
	b := gpuBackend(t)
	tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		requireGPU(t, "no CUPTI: %v", err)
	}
	defer func() { assert.NoError(t, tr.close()) }()
	assert.True(t, tr.enabled(activityKernel))

	g := chains(1, 1, dag.Spin, 5, false)
	defer openSession(t, b, g).Close()
	const nstreams, rounds = 2, 5
	raw, err := newRawLoop(b, nstreams, dag.Normal, dag.Spin, 5)
	require.NoError(t, err)
	defer raw.close()

	before, err := tr.now()
	require.NoError(t, err)
	require.NoError(t, raw.tracedLaunchesC(tr, rounds, 100))
	// Copies and a fill, each its own op.
	d := raw.d
	p, err := b.drv.memAlloc(d.ctx, 1<<20)
	require.NoError(t, err)
	defer b.drv.memFree(d.ctx, p)
	hp, err := b.drv.hostAlloc(d.ctx, 1<<20) // pinned: one record per copy
	require.NoError(t, err)
	defer b.drv.hostFree(d.ctx, hp)
	host := unsafe.Slice((*byte)(hp), 1<<20)
	require.NoError(t, tr.tracedCall(200, func() error { return b.drv.htod(d.ctx, p, host) }))
	require.NoError(t, tr.tracedCall(201, func() error { return b.drv.zero(d.ctx, p, 1<<20) }))
	require.NoError(t, tr.tracedCall(202, func() error { return b.drv.dtoh(d.ctx, host, p) }))
	require.NoError(t, b.drv.ctxSync(d.ctx))
	after, err := tr.now()
	require.NoError(t, err)

	recs, err := tr.flush()
	require.NoError(t, err)
	byOp := map[int64][]activityRecord{}
	for _, r := range recs {
		byOp[r.Op] = append(byOp[r.Op], r)
	}
	want := map[int64]activityKind{200: activityMemcpy, 201: activityMemset, 202: activityMemcpy}
	for i := range nstreams * rounds {
		want[int64(100+i)] = activityKernel
	}
	streams := map[uint32]bool{}
	for op, kind := range want {
		got := byOp[op]
		require.Len(t, got, 1, "op %d: records %+v", op, got)
		r := got[0]
		assert.Equal(t, kind, r.Kind, "op %d", op)
		assert.LessOrEqual(t, before, r.Start, "op %d starts before the work was submitted", op)
		assert.Less(t, r.Start, r.End, "op %d", op)
		assert.LessOrEqual(t, r.End, after, "op %d ends after the synchronisation", op)
		assert.Zero(t, r.GraphNodeID, "op %d is no graph node", op)
		if kind == activityKernel {
			streams[r.Stream] = true
			// spin(5) runs about 5 us.
			assert.GreaterOrEqual(t, r.End-r.Start, uint64(4000), "op %d", op)
		} else {
			assert.Equal(t, uint64(1<<20), r.Bytes, "op %d", op)
		}
	}
	assert.Len(t, streams, nstreams, "kernels ran on both streams")
	// CUPTI's count and dagrun's apart: which one is not zero tells whose
	// the missing records were; the sink's diagnostics say when.
	st := tr.stats()
	t.Logf("%d records, kinds enabled %v, CUPTI %d at %s; launches named by callback %d, by external correlation %d",
		len(recs), tr.kinds, tr.version, tr.path, tr.linked, tr.externals)
	t.Logf("dropped by CUPTI %d, lost by dagrun %d; sink: %v", tr.cuptiDropped(), tr.lost(), st)
	assert.Zero(t, tr.cuptiDropped(), "records CUPTI dropped: %v", st)
	assert.Zero(t, tr.lost(), "records dagrun lost: %v", st)

	// A second tracer in the process is refused as busy.
	_, err = newActivityTracer([]string{tr.path})
	assert.ErrorIs(t, err, ErrCUPTIBusy)
}

// TestCUPTIGraphReplay replays a captured graph twice under one op id and
// checks every kernel record names the op and a captured kernel node, each
// node once per replay, and one graph-launch record per replay.
func TestCUPTIGraphReplay(t *testing.T) {
	b := gpuBackend(t)
	tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		requireGPU(t, "no CUPTI: %v", err)
	}
	defer func() { assert.NoError(t, tr.close()) }()
	defer openSession(t, b, chains(1, 1, dag.Spin, 5, false)).Close()
	const nstreams, rounds, replays = 2, 3, 2
	raw, err := newRawLoop(b, nstreams, dag.Normal, dag.Spin, 5)
	require.NoError(t, err)
	defer raw.close()
	rg, err := newRawGraph(raw, rounds)
	require.NoError(t, err)
	defer rg.close()
	ids, err := rg.cuptiKernelNodeIDs(tr, 64)
	require.NoError(t, err)
	require.Len(t, ids, nstreams*rounds)

	require.NoError(t, tr.tracedCall(500, func() error { return rg.launches(replays) }))
	recs, err := tr.flush()
	require.NoError(t, err)
	perNode := map[uint64]int{}
	launches := 0
	for _, r := range recs {
		switch r.Kind {
		case activityKernel:
			assert.Equal(t, int64(500), r.Op)
			assert.Less(t, r.Start, r.End)
			perNode[r.GraphNodeID]++
		case activityGraphLaunch:
			launches++
		}
	}
	want := map[uint64]int{}
	for _, id := range ids {
		want[id] = replays
	}
	assert.Equal(t, want, perNode, "kernel records by captured node (clones seen: %d)", len(tr.clones))
	assert.Zero(t, launches, "a node-level tracer asks for no graph-launch records")
	t.Logf("%d records, %d clone links; launches named by callback %d, by external correlation %d",
		len(recs), len(tr.clones), tr.linked, tr.externals)
}

// TestCUPTIGraphReplayMarkers replays a captured graph 20 times back to
// back, each launch marked with its replay (as a session's LaunchGraph
// does), and flushes once: every kernel record names its replay, every
// captured kernel node has one record per replay, and on each stream a
// replay's kernels end before the next replay's begin.
func TestCUPTIGraphReplayMarkers(t *testing.T) {
	b := gpuBackend(t)
	tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		requireGPU(t, "no CUPTI: %v", err)
	}
	defer func() { assert.NoError(t, tr.close()) }()
	defer openSession(t, b, chains(1, 1, dag.Spin, 5, false)).Close()
	const nstreams, rounds, replays, first = 2, 3, 20, 100
	raw, err := newRawLoop(b, nstreams, dag.Normal, dag.Spin, 5)
	require.NoError(t, err)
	defer raw.close()
	rg, err := newRawGraph(raw, rounds)
	require.NoError(t, err)
	defer rg.close()
	ids, err := rg.cuptiKernelNodeIDs(tr, 64)
	require.NoError(t, err)
	require.Len(t, ids, nstreams*rounds)

	require.NoError(t, rg.markedLaunches(tr, replays, first))
	recs, err := tr.flush()
	require.NoError(t, err)
	type key struct {
		replay int64
		node   uint64
	}
	perNode := map[key]int{}
	type window struct{ start, end uint64 }
	byStream := map[uint32]map[int64]window{} // CUPTI stream id, replay: first start, last end
	unmarked := 0
	for _, r := range recs {
		if r.Kind != activityKernel {
			continue
		}
		if r.Replay < first || r.Replay >= first+replays {
			unmarked++
			continue
		}
		perNode[key{r.Replay, r.GraphNodeID}]++
		w, ok := byStream[r.Stream][r.Replay]
		if !ok {
			if byStream[r.Stream] == nil {
				byStream[r.Stream] = map[int64]window{}
			}
			w.start = r.Start
		}
		w.start, w.end = min(w.start, r.Start), max(w.end, r.End)
		byStream[r.Stream][r.Replay] = w
	}
	t.Logf("%d records, %d kernel records without a marker of this batch; launches named by callback %d, by external correlation %d; "+
		"clones %d; sink: %v", len(recs), unmarked, tr.linked, tr.externals, len(tr.clones), tr.stats())
	assert.Zero(t, unmarked, "every kernel record names its replay")
	want := map[key]int{}
	for r := int64(first); r < first+replays; r++ {
		for _, id := range ids {
			want[key{r, id}] = 1
		}
	}
	assert.Equal(t, want, perNode, "kernel records by replay and captured node")
	assert.Len(t, byStream, nstreams)
	for st, ws := range byStream {
		for r := int64(first); r+1 < first+replays; r++ {
			a, b := ws[r], ws[r+1]
			assert.LessOrEqual(t, a.end, b.start, "stream %d: replay %d ends at %d, after replay %d starts at %d", st, r, a.end, r+1, b.start)
		}
	}
	assert.Zero(t, tr.dropped(), "%v", tr.stats())
}

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
		se := &Session{}
		se.tim = timer{se: se, cupti: &cuptiTiming{tr: tr}}
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
		se := &Session{}
		se.tim = timer{se: se, timing: true, cupti: &cuptiTiming{tr: tr, whole: true}}
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
