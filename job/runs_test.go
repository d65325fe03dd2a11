package job

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRuns(t *testing.T) {
	tests := []struct {
		k      string
		repeat int
		want   []int // the runs traced, of 1..repeat
		err    string
	}{
		{k: "", repeat: 3, want: []int{1, 2, 3}},
		{k: "all", repeat: 2, want: []int{1, 2}},
		{k: "first:2", repeat: 5, want: []int{1, 2}},
		{k: "last:2", repeat: 5, want: []int{4, 5}},
		{k: "last:9", repeat: 3, want: []int{1, 2, 3}},
		{k: "1,4-5", repeat: 6, want: []int{1, 4, 5}},
		{k: "3", repeat: 3, want: []int{3}},
		{k: "last:0", repeat: 3, err: "last:N needs a count of runs, at least 1"},
		{k: "0", repeat: 3, err: "runs are numbered 1 to 3"},
		{k: "2-1", repeat: 3, err: "A <= B"},
		{k: "4", repeat: 3, err: "runs are numbered 1 to 3"},
		{k: "x", repeat: 3, err: "use all, first:N, last:N"},
		{k: "1,,2", repeat: 3, err: "use all, first:N, last:N"},
	}
	for _, tc := range tests {
		t.Run(tc.k, func(t *testing.T) {
			traced, err := ParseRuns(tc.k, tc.repeat)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			var got []int
			for run := 1; run <= tc.repeat; run++ {
				if traced(run) {
					got = append(got, run)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRunsText(t *testing.T) {
	assert.Equal(t, "run 2", RunsText([]int{2}, 5))
	assert.Equal(t, "all 3 runs", RunsText([]int{1, 2, 3}, 3))
	assert.Equal(t, "2 runs", RunsText([]int{1, 3}, 3))
}
