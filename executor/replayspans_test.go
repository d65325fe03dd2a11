package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor/device"
)

// replaySpan is one span a device.ReplayTimer gives.
type replaySpan struct {
	replay, op, stream int
	start, end         time.Duration
}

// stubTimer is a device session's timer that gives fixed replay spans.
type stubTimer struct{ spans []replaySpan }

func (s *stubTimer) SetTiming(bool) {}
func (s *stubTimer) Spans(f func(op, stream int, start, end time.Duration)) error {
	return s.ReplaySpans(func(_, op, stream int, start, end time.Duration) { f(op, stream, start, end) })
}
func (s *stubTimer) TimesReplays() bool { return true }
func (s *stubTimer) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	for _, sp := range s.spans {
		f(sp.replay, sp.op, sp.stream, sp.start, sp.end)
	}
	return nil
}

// TestReplaySpansAssembly: Graph.ReplaySpans groups the backend's spans by
// launch whether they come replay by replay or interleaved, measures each
// replay's spans from its start and gives its end, keeps a replay timed
// whole (op -1) as Whole with no spans, and drops eager spans and the
// replays of other graphs.
func TestReplaySpansAssembly(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	tests := []struct {
		name  string
		spans []replaySpan
		want  []ReplaySpans
	}{
		{"grouped", []replaySpan{
			{-1, 9, 0, us(0), us(1)},
			{0, 0, 0, us(10), us(12)}, {0, 1, 1, us(11), us(15)},
			{1, 0, 0, us(20), us(22)}, {1, 1, 1, us(21), us(25)},
		}, []ReplaySpans{
			{Launch: 1, Start: us(10), End: us(15), Spans: []Span{{0, 0, 0, us(2), 0}, {1, 1, us(1), us(5), 0}}},
			{Launch: 2, Start: us(20), End: us(25), Spans: []Span{{0, 0, 0, us(2), 0}, {1, 1, us(1), us(5), 0}}},
		}},
		{"interleaved", []replaySpan{
			{1, 0, 0, us(20), us(22)}, {0, 1, 1, us(11), us(15)}, {7, 0, 0, us(50), us(51)},
			{0, 0, 0, us(10), us(12)}, {1, 1, 1, us(21), us(25)},
		}, []ReplaySpans{
			{Launch: 1, Start: us(10), End: us(15), Spans: []Span{{1, 1, us(1), us(5), 0}, {0, 0, 0, us(2), 0}}},
			{Launch: 2, Start: us(20), End: us(25), Spans: []Span{{0, 0, 0, us(2), 0}, {1, 1, us(1), us(5), 0}}},
		}},
		{"whole replays", []replaySpan{
			{-1, 9, 0, us(0), us(1)}, {0, -1, 0, us(10), us(40)}, {1, -1, 0, us(41), us(70)},
		}, []ReplaySpans{
			{Launch: 1, Start: us(10), End: us(40), Whole: true},
			{Launch: 2, Start: us(41), End: us(70), Whole: true},
		}},
		{"a replay without spans is left out", []replaySpan{{1, -1, 0, us(41), us(70)}},
			[]ReplaySpans{{Launch: 2, Start: us(41), End: us(70), Whole: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubTimer{spans: tc.spans}
			var c struct{ device.Capturer } // never called: only its presence is checked
			g := &Graph{s: &Session{time: timing{timer: st}}, c: c, launched: []launchRange{{seq: 0, launch: 1, n: 2}}}
			got, err := g.ReplaySpans()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Nil(t, g.launched, "the launches are read")
		})
	}
}
