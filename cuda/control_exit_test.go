//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A loop or branch ends in dr_cond_exit where CUPTI traces ops one by one,
// and only there: its record, a node of the graph the op was lowered
// into, ends the op's span whatever CUPTI makes of its bodies' records.
func TestControlExits(t *testing.T) {
	for _, tc := range []struct {
		name string
		tim  *timer
		want bool
	}{
		{"events", &timer{timing: true}, false},
		{"untimed", &timer{}, false},
		{"cupti", &timer{timing: true, cupti: &cuptiTiming{}}, true},
		{"cupti-graph", &timer{timing: true, cupti: &cuptiTiming{whole: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, (&controller{tim: tc.tim}).exits())
		})
	}
	assert.Contains(t, condKernels(), condExit, "loaded with every control op")
	assert.Contains(t, condSource, `extern "C" __global__ void dr_cond_exit()`)
}
