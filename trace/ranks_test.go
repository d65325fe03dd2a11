package trace_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/trace"
)

// TestMergeRanks merges the traces of two ranks whose clocks started at
// different times after the rendezvous, through the Chrome files dagrun
// run writes, and checks the alignment and the processes.
func TestMergeRanks(t *testing.T) {
	p := pipeline(t)
	var files [2]bytes.Buffer
	offsets := []time.Duration{300 * time.Microsecond, 100 * time.Microsecond}
	for r := range 2 {
		tr := trace.FromRun(p, simulatedSpans(p, 0))
		tr.Rank = &trace.RankClock{Rank: r, World: 2, Offset: offsets[r]}
		require.NoError(t, tr.WriteChrome(&files[r]))
	}
	var read []*trace.Trace
	for r := 1; r >= 0; r-- { // any order
		tr, err := trace.ReadChrome(&files[r])
		require.NoError(t, err)
		require.NotNil(t, tr.Rank)
		assert.Equal(t, trace.RankClock{Rank: r, World: 2, Offset: offsets[r]}, *tr.Rank)
		read = append(read, tr)
	}
	one := trace.FromRun(p, simulatedSpans(p, 0))
	m, err := trace.MergeRanks(read)
	require.NoError(t, err)
	require.Len(t, m.Lanes, 2*len(one.Lanes))
	require.Len(t, m.Slices, 2*len(one.Slices))
	require.Len(t, m.Flows, 2*len(one.Flows))
	assert.Equal(t, "rank 0 GPU 0", m.Lanes[0].Process())
	assert.Equal(t, "rank 1 GPU 0", m.Lanes[len(one.Lanes)].Process())
	assert.Equal(t, 2*one.Figures.Ops, m.Figures.Ops)
	// Rank 1's clock started 200 µs before rank 0's, after the rendezvous:
	// its slices come first, rank 0's 200 µs later.
	n := len(one.Slices)
	for i, s := range one.Slices {
		assert.Equal(t, s.Start+200*time.Microsecond, m.Slices[i].Start, "rank 0 %s", s.Name)
		assert.Equal(t, s.Start, m.Slices[n+i].Start, "rank 1 %s", s.Name)
		assert.Equal(t, s.Name, m.Slices[n+i].Name)
	}
	for _, f := range m.Flows[len(one.Flows):] {
		assert.True(t, m.Slices[f.From].Lane >= len(one.Lanes) && m.Slices[f.To].Lane >= len(one.Lanes), "rank 1's flows stay on its lanes")
	}
	var svg, chrome bytes.Buffer
	require.NoError(t, m.WriteSVG(&svg))
	assert.Contains(t, svg.String(), "rank 1 GPU 0")
	require.NoError(t, m.WriteChrome(&chrome))
	assert.Contains(t, chrome.String(), `"name":"rank 1 GPU 0"`)

	_, err = trace.MergeRanks([]*trace.Trace{read[0], read[0]})
	assert.ErrorContains(t, err, "two traces of rank 1")
	_, err = trace.MergeRanks([]*trace.Trace{one})
	assert.ErrorContains(t, err, "not the trace of a rank")
}

// A rank's trace is offset by when its runs started after the rendezvous
// and by its earliest span, its time zero.
func TestFromRankRuns(t *testing.T) {
	p := pipeline(t)
	spans := simulatedSpans(p, 0)
	for i := range spans {
		spans[i].Start += 7 * time.Microsecond
		spans[i].End += 7 * time.Microsecond
	}
	runs := []trace.RunSpans{{Run: 2, Start: time.Millisecond, Spans: spans}}
	tr := trace.FromRankRuns(p, runs, 1, 4, 50*time.Microsecond)
	require.NotNil(t, tr.Rank)
	assert.Equal(t, trace.RankClock{Rank: 1, World: 4, Offset: 50*time.Microsecond + time.Millisecond + 7*time.Microsecond}, *tr.Rank)
	assert.Len(t, tr.Slices, len(trace.FromRuns(p, runs).Slices))
}

// Whole replays are listed after a trace's summary: the first few, or all.
func TestWriteReplays(t *testing.T) {
	tr := trace.FromRun(pipeline(t), nil)
	var none bytes.Buffer
	tr.WriteReplays(&none, false)
	assert.Empty(t, none.String())
	for i := range 7 {
		tr.Figures.Replays = append(tr.Figures.Replays, trace.WholeReplay{Run: i + 1, Dur: time.Millisecond})
	}
	tr.Figures.ReplayTiming = "on the host"
	var brief, all bytes.Buffer
	tr.WriteReplays(&brief, false)
	tr.WriteReplays(&all, true)
	assert.Equal(t, "replays traced as whole graphs (on the host):\n  replay 1: 1.00 ms\n  replay 2: 1.00 ms\n  replay 3: 1.00 ms\n  replay 4: 1.00 ms\n  replay 5: 1.00 ms\n  and 2 more (-v lists every one; the trace holds them)\n", brief.String())
	assert.Contains(t, all.String(), "  replay 7: 1.00 ms\n")
	assert.NotContains(t, all.String(), "more")
}
