//go:build cgo

package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
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

// requireGPU skips a GPU test or benchmark with why, or fails it when
// DAGRUN_REQUIRE_GPU=1, so that the GPU machine's scripts cannot pass on a
// skip.
func requireGPU(t testing.TB, why string, args ...any) {
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
