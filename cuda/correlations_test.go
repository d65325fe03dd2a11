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
		{"unclaimed ids wait for a later flush", [][]pair{{{20, 1}, {21, 2}}, {{40, 3}}}, [][]uint32{{21}, {20, 40, 21}},
			[][]int64{{2}, {1, 3, -1}}, 0},
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
