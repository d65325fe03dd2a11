package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelpSpelling(t *testing.T) {
	tests := map[string]string{
		`invalid value "0" for flag -streams: use 1 to 32`: `invalid value "0" for flag --streams: use 1 to 32`,
		`flag provided but not defined: -colour`:           `flag provided but not defined: --colour`,
		`flag needs an argument: -allow-path`:              `flag needs an argument: --allow-path`,
		`flag needs an argument: -o`:                       `flag needs an argument: -o`,
		`bad flag syntax: ---x`:                            `bad flag syntax: ---x`,
	}
	for in, want := range tests {
		assert.Equal(t, want, helpSpelling(in), in)
	}
}

func TestParseTraceRuns(t *testing.T) {
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
			traced, err := parseTraceRuns(tc.k, tc.repeat)
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

func TestSuggestName(t *testing.T) {
	ops := []string{"init", "scale0", "sum0", "download_total"}
	assert.Equal(t, `did you mean "scale0"?`, suggestName("scale9", ops))
	assert.Equal(t, `did you mean "download_total"?`, suggestName("downlaod_total", ops))
	assert.Equal(t, "its ops are init, scale0, sum0, download_total", suggestName("zzzzzzzz", ops))
	// A huge name is compared with nothing: the work stays bounded.
	assert.Equal(t, "its ops are init, scale0, sum0, download_total", suggestName(strings.Repeat("s", 1<<20), ops))
	many := make([]string, 20)
	for i := range many {
		many[i] = strings.Repeat("x", i+10)
	}
	assert.Contains(t, suggestName("q", many), ", ...")
}
