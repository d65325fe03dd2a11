package trace_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

const us = time.Microsecond

// handMade is a measured trace with round numbers:
//
//	compute0  .  .  .  .  [k1 12-30]  .  .  [k2 40-50]
//	compute1  [k3 5-8]
//	h2d       [up1 0-10]  [up2 20-35]
//
// with waits up1 -> k1 (e0) and up2 -> k2 (e1).
func handMade() *trace.Trace {
	return &trace.Trace{
		Lanes: []trace.Lane{
			{Stream: 1, Device: 0, Priority: dag.Normal, Kind: planner.Compute, Name: "dev0.normal.compute0"},
			{Stream: 2, Device: 0, Priority: dag.Normal, Kind: planner.Compute, Name: "dev0.normal.compute1"},
			{Stream: 0, Device: 0, Priority: dag.Normal, Kind: planner.CopyH2D, Name: "dev0.normal.h2d"},
		},
		Slices: []trace.Slice{
			{Op: 1, Name: "k1", Kind: dag.Launch, Lane: 0, Start: 12 * us, Dur: 18 * us, Bytes: 4096, Grid: dag.Grid1(4), Block: dag.Grid1(256), Reads: []string{"x"}, Writes: []string{"y"}},
			{Op: 3, Name: "k2", Kind: dag.Launch, Lane: 0, Start: 40 * us, Dur: 10 * us},
			{Op: 4, Name: "k3", Kind: dag.Fill, Lane: 1, Start: 5 * us, Dur: 3 * us, Bytes: 1024, Writes: []string{"z[0:1024]"}},
			{Op: 0, Name: "up1", Kind: dag.Copy, Lane: 2, Start: 0, Dur: 10 * us, Bytes: 4096, Reads: []string{"in"}, Writes: []string{"x"}},
			{Op: 2, Name: "up2", Kind: dag.Copy, Lane: 2, Start: 20 * us, Dur: 15 * us},
		},
		Flows: []trace.Flow{{Event: 0, From: 3, To: 0}, {Event: 1, From: 4, To: 1}},
		Figures: trace.Figures{Ops: 5, Streams: 3, CrossEdges: 3, Waits: 2,
			EstMakespan: 45 * us, EstCriticalPath: 38 * us, CriticalPath: 40 * us},
	}
}

func TestSummarize(t *testing.T) {
	s := handMade().Summarize()
	assert.Equal(t, 50*us, s.Makespan)
	require.Len(t, s.Streams, 3)
	assert.Equal(t, trace.StreamSummary{Lane: 0, Ops: 2, Busy: 28 * us, Share: 0.56}, s.Streams[0])
	assert.Equal(t, trace.StreamSummary{Lane: 1, Ops: 1, Busy: 3 * us, Share: 0.06}, s.Streams[1])
	assert.Equal(t, trace.StreamSummary{Lane: 2, Ops: 2, Busy: 25 * us, Share: 0.5}, s.Streams[2])
	assert.Equal(t, 25*us, s.CopyBusy)
	assert.Equal(t, 31*us, s.KernelBusy, "launches and fills count as kernels")
	assert.Equal(t, 13*us, s.Overlap, "k3 under up1 (3 µs) and k1 under up2 (10 µs)")
	assert.InDelta(t, 0.26, s.OverlapShare, 1e-12)
	assert.InDelta(t, 0.52, s.CopyHidden, 1e-12)
	assert.Equal(t, 40*us, s.CriticalPath)
	assert.InDelta(t, 1.25, s.Ratio, 1e-12)
	assert.Equal(t, []trace.WaitSummary{
		{Slice: 0, For: []int{3}, Idle: 12 * us, Lag: 2 * us}, // k1: first on its stream, idle from the trace's start
		{Slice: 1, For: []int{4}, Idle: 10 * us, Lag: 5 * us}, // k2: idle from k1's end (30) to 40
	}, s.Waits)
}

// A split all_reduce's blocks beside the GEMMs of the next block count as
// collective time beside kernels, in the summary and in the caption.
func TestSummarizeCollectiveOverlap(t *testing.T) {
	tr := &trace.Trace{
		Lanes: []trace.Lane{{Name: "dev0.normal.compute0"}, {Stream: 1, Name: "dev0.normal.coll"}},
		Slices: []trace.Slice{
			{Op: 0, Name: "fc2#1/2", Kind: dag.Gemm, Lane: 0, Start: 0, Dur: 20 * us},
			{Op: 1, Name: "fc2#2/2", Kind: dag.Gemm, Lane: 0, Start: 20 * us, Dur: 20 * us},
			{Op: 2, Name: "reduce#1/2", Kind: dag.AllReduce, Lane: 1, Start: 20 * us, Dur: 10 * us},
			{Op: 3, Name: "reduce#2/2", Kind: dag.AllReduce, Lane: 1, Start: 40 * us, Dur: 10 * us},
		},
	}
	s := tr.Summarize()
	assert.Equal(t, 20*us, s.CommBusy)
	assert.Equal(t, 10*us, s.CommOverlap, "the first block's reduction beside the second's GEMM")
	assert.InDelta(t, 0.5, s.CommHidden, 1e-12)
	var b bytes.Buffer
	require.NoError(t, tr.WriteSummary(&b))
	assert.Contains(t, b.String(), "collective/compute    10.0 µs (50.0% of collective time 20.0 µs beside kernels)")
	assert.Zero(t, handMade().Summarize().CommBusy)
}

func TestSummarizeOverlappingSlicesAndManyWaits(t *testing.T) {
	tr := &trace.Trace{
		Lanes: []trace.Lane{{Name: "a"}, {Stream: 1, Name: "b"}, {Stream: 2, Name: "c", Kind: planner.CopyD2H}},
		Slices: []trace.Slice{
			{Op: 0, Name: "x", Kind: dag.Launch, Lane: 0, Start: 0, Dur: 10 * us},
			{Op: 1, Name: "y", Kind: dag.Launch, Lane: 0, Start: 5 * us, Dur: 10 * us}, // overlaps x: busy is the union
			{Op: 2, Name: "p", Kind: dag.Host, Lane: 1, Start: 0, Dur: 20 * us},
			{Op: 3, Name: "q", Kind: dag.Copy, Lane: 2, Start: 0, Dur: 4 * us},
			{Op: 4, Name: "r", Kind: dag.Copy, Lane: 2, Start: 30 * us, Dur: 10 * us},
		},
		// r waits for y and for p: one row, lag from the later of the two.
		Flows: []trace.Flow{{Event: 0, From: 1, To: 4}, {Event: 1, From: 2, To: 4}},
	}
	s := tr.Summarize()
	assert.Equal(t, 40*us, s.Makespan)
	assert.Equal(t, 15*us, s.Streams[0].Busy)
	assert.Equal(t, 14*us, s.CopyBusy)
	assert.Equal(t, 15*us, s.KernelBusy, "host steps are not kernels")
	assert.Equal(t, 4*us, s.Overlap)
	assert.Zero(t, s.Ratio, "no critical path, no ratio")
	assert.Equal(t, []trace.WaitSummary{{Slice: 4, For: []int{1, 2}, Idle: 26 * us, Lag: 10 * us}}, s.Waits)
}

// The options leave out what they say and nothing else.
func TestWriteSummaryWith(t *testing.T) {
	for _, tc := range []struct {
		name        string
		o           trace.SummaryOptions
		waits, plan bool
	}{
		{"all", trace.SummaryOptions{}, true, true},
		{"brief", trace.SummaryOptions{Brief: true}, false, true},
		{"no estimate", trace.SummaryOptions{NoEstimate: true}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, handMade().WriteSummaryWith(&buf, tc.o))
			out := buf.String()
			assert.Contains(t, out, "critical path         40.0 µs")
			assert.Equal(t, tc.waits, strings.Contains(out, "longest waits"))
			assert.Equal(t, tc.plan, strings.Contains(out, "plan estimate"))
		})
	}
}

func TestWriteSummary(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, handMade().WriteSummary(&buf))
	out := buf.String()
	for _, want := range []string{
		"makespan 50.0 µs (measured), 5 ops on 3 streams",
		"dev0.normal.compute0  normal    compute    2  28.0 µs  56.0%",
		"copy/compute overlap  13.0 µs (26.0% of makespan; 52.0% of copy time 25.0 µs hidden behind kernels",
		"critical path         40.0 µs (makespan / critical path = 1.25)",
		"k1  up1 on dev0.normal.h2d  12.0 µs  2.00 µs",
	} {
		assert.Contains(t, out, want)
	}
	// Columns line up: every row of the stream table is as wide as its header.
	lines := strings.Split(out, "\n")
	assert.Len(t, lines[3], len(lines[2])+1, "a µ is two bytes: %q vs %q", lines[2], lines[3])
}

func ExampleTrace_WriteSummary() {
	handMade().WriteSummary(os.Stdout)
	// Output:
	// makespan 50.0 µs (measured), 5 ops on 3 streams
	//
	// stream                priority  kind     ops     busy  share
	// dev0.normal.compute0  normal    compute    2  28.0 µs  56.0%
	// dev0.normal.compute1  normal    compute    1  3.00 µs   6.0%
	// dev0.normal.h2d       normal    h2d        2  25.0 µs  50.0%
	//
	// copy/compute overlap  13.0 µs (26.0% of makespan; 52.0% of copy time 25.0 µs hidden behind kernels, kernel time 31.0 µs)
	// critical path         40.0 µs (makespan / critical path = 1.25)
	// plan estimate         makespan 45.0 µs, critical path 38.0 µs (cost model)
	// plan                  5 ops, 3 streams, 3 cross-stream edges, 2 waits
	//
	// longest waits (2 of 2; idle: the stream's gap before the op, lag: from the end of the op waited for to the op's start)
	// stream                op  waited for                 idle      lag
	// dev0.normal.compute0  k1  up1 on dev0.normal.h2d  12.0 µs  2.00 µs
	// dev0.normal.compute0  k2  up2 on dev0.normal.h2d  10.0 µs  5.00 µs
}
