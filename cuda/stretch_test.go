//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/executor/device"
)

// The first crossing of a Submit call ends after its first op (and the
// record that follows it), so the device starts while the rest converts.
func TestFirstCrossing(t *testing.T) {
	run, rec, wait := device.Step{Kind: device.RunStep}, device.Step{Kind: device.RecordStep}, device.Step{Kind: device.WaitStep}
	for _, tc := range []struct {
		name  string
		steps []device.Step
		want  int
	}{
		{"none", nil, 0},
		{"an op alone", []device.Step{run}, 1},
		{"an op and its record", []device.Step{run, rec, wait, run}, 2},
		{"waits before the op", []device.Step{wait, wait, run, run, rec}, 3},
		{"waits before the op and its record", []device.Step{wait, run, rec, run}, 3},
		{"no op", []device.Step{wait, rec, wait}, 3},
	} {
		assert.Equal(t, tc.want, firstCrossing(tc.steps), tc.name)
	}
}
