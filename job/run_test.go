package job

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

func TestGraphMode(t *testing.T) {
	for src, want := range map[string]executor.GraphMode{
		"":                    executor.GraphAuto,
		"run: {graph: true}":  executor.GraphAlways,
		"run: {graph: false}": executor.GraphNever,
	} {
		s, err := spec.Parse("g.yaml", []byte(src+"\nbuffers:\n  d: {size: 64}\nops:\n  - {fill: {buffer: d, value: 0}}\n"))
		require.NoError(t, err, src)
		assert.Equal(t, want, GraphMode(s), src)
	}
}

func TestInterrupted(t *testing.T) {
	assert.Equal(t, "interrupted before the runs started; everything was freed", (&RunError{}).Interrupted())
	assert.Equal(t, "interrupted after 0 of 1 run completed; the one in flight was abandoned and everything was freed",
		(&RunError{Repeat: 1}).Interrupted())
	assert.Equal(t, "interrupted after 3 of 10 runs completed; the one in flight was abandoned and everything was freed",
		(&RunError{Done: 3, Repeat: 10}).Interrupted())
}
