package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The time per replay leaves out the first batch and the batches that
// start in the first half of the replays, where there are others.
func TestReplayClock(t *testing.T) {
	type batch struct {
		n    int
		each time.Duration
	}
	tests := []struct {
		name    string
		repeat  int
		batches []batch
		want    time.Duration
	}{
		{"none", 0, nil, 0},
		{"one replay", 1, []batch{{1, 90}}, 90},
		{"the first batch left out", 3, []batch{{1, 90}, {2, 10}}, 10},
		{"the warm-up left out", 200, []batch{{1, 90}, {64, 30}, {64, 20}, {64, 10}, {7, 10}}, 10},
		{"too few after the warm-up", 4, []batch{{1, 90}, {1, 30}}, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, done := newReplayClock(tc.repeat), 0
			for _, b := range tc.batches {
				c.add(time.Duration(b.n)*b.each, b.n, done)
				done += b.n
			}
			assert.Equal(t, tc.want, c.perReplay())
		})
	}
}
