//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCorrelations(t *testing.T) {
	type pair struct {
		id uint32
		v  int64
	}
	tests := []struct {
		name    string
		flushes [][]pair   // set in each flush
		claims  [][]uint32 // claimed in each flush, after its sets
		want    [][]int64  // what each claim finds; -1: nothing
		pending int
	}{
		{"close ids, all claimed", [][]pair{{{10, 0}, {11, 1}, {13, 2}}}, [][]uint32{{10, 13, 11, 13}},
			[][]int64{{0, 2, 1, 2}}, 0},
		{"ids far apart use the map", [][]pair{{{1, 5}, {1 << 30, 6}}}, [][]uint32{{1 << 30, 1, 2}},
			[][]int64{{6, 5, -1}}, 0},
		{"unclaimed ids wait for a later flush", [][]pair{{{20, 1}, {21, 2}}, {{40, 3}}}, [][]uint32{{21}, {20, 40}},
			[][]int64{{2}, {1, 3}}, 0},
		{"claimed ids stay claimable one more flush", [][]pair{{{20, 1}, {21, 2}}, {{40, 3}}, {}, {}},
			[][]uint32{{21}, {20, 40, 21}, {21, 20, 40}, {20, 40}}, [][]int64{{2}, {1, 3, 2}, {-1, 1, 3}, {-1, -1}}, 0},
		{"unclaimed at the end", [][]pair{{{7, 1}, {8, 2}}}, [][]uint32{{8}}, [][]int64{{2}}, 1},
		{"a claim before the set of a later flush", [][]pair{{}, {{9, 4}}}, [][]uint32{{9}, {9}}, [][]int64{{-1}, {4}}, 0},
		{"a marker and its op agree", [][]pair{{{3, replayMarker + 2}, {3, replayMarker + 2}}}, [][]uint32{{3, 3}},
			[][]int64{{replayMarker + 2, replayMarker + 2}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCorrelations()
			for i, sets := range tc.flushes {
				lo, hi := ^uint32(0), uint32(0)
				for _, p := range sets {
					lo, hi = min(lo, p.id), max(hi, p.id)
				}
				c.open(lo, hi, len(sets))
				for _, p := range sets {
					c.set(p.id, p.v)
				}
				var got []int64
				for _, id := range tc.claims[i] {
					v, ok := c.claim(id)
					if !ok {
						v = -1
					}
					got = append(got, v)
				}
				c.close()
				assert.Equal(t, tc.want[i], got, "flush %d", i)
			}
			assert.Equal(t, tc.pending, c.pending())
		})
	}
}

// complete waits for a record of every op run eagerly whose work has
// records, and for every node of the last replay (its graph-launch record
// under the whole-graph tracer).
func TestCompleteRecords(t *testing.T) {
	eager := func(op int64, k activityKind) activityRecord {
		return activityRecord{Kind: k, Op: op, Replay: -1, Start: 1, End: 2}
	}
	replayed := func(replay, op int64, k activityKind) activityRecord {
		return activityRecord{Kind: k, Op: op, Replay: replay, Start: 1, End: 2}
	}
	tests := []struct {
		name     string
		ops      []cuptiOp
		launches int // replays since the last Spans, the last one's graph having 2 nodes with records
		whole    bool
		recs     []activityRecord
		want     bool
	}{
		{"nothing awaited", nil, 0, false, nil, true},
		{"every op has a record", []cuptiOp{{0, 0, true}, {1, 1, true}}, 0, false,
			[]activityRecord{eager(1, activityMemcpy), eager(0, activityKernel)}, true},
		{"an op without records", []cuptiOp{{0, 0, true}, {1, 1, true}}, 0, false, []activityRecord{eager(0, activityKernel)}, false},
		{"ops with no records of their own are not awaited", []cuptiOp{{0, 0, true}, {1, 1, false}}, 0, false,
			[]activityRecord{eager(0, activityMemset)}, true},
		{"a memory pool record is not the op's work", []cuptiOp{{0, 0, true}}, 0, false, []activityRecord{eager(0, activityMemoryPool)}, false},
		{"the last replay's nodes", nil, 3, false,
			[]activityRecord{replayed(1, 0, activityKernel), replayed(2, 0, activityKernel), replayed(2, 1, activityKernel)}, true},
		{"a node of the last replay missing", nil, 3, false,
			[]activityRecord{replayed(1, 0, activityKernel), replayed(1, 1, activityKernel), replayed(2, 0, activityKernel)}, false},
		{"whole replays: the last one's record", nil, 2, true, []activityRecord{replayed(1, -1, activityGraphLaunch)}, true},
		{"whole replays: the last one's record missing", nil, 2, true, []activityRecord{replayed(0, -1, activityGraphLaunch)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &cuptiTiming{whole: tc.whole, ops: tc.ops, launchStreams: make([]int32, tc.launches), lastRecords: 2}
			for _, o := range tc.ops {
				c.setStream(o.op, o.stream)
			}
			c.setStream(1, 0) // replays name ops 0 and 1
			assert.Equal(t, tc.want, c.complete(tc.recs))
		})
	}
}
