package perf

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

// Every op kind has a default cost: its own, or one pass of its body. A
// kind added to dag without an entry here fails this test.
func TestKindCostsCoverEveryKind(t *testing.T) {
	for _, k := range dag.OpKinds() {
		f := costOf(k)
		assert.True(t, f.cost != nil || f.body, "kind %s has no default cost in the cost table", k)
		assert.Equal(t, k.Info().Body != dag.NoBody, f.body, "kind %s: only loops and branches cost their body", k)
	}
	assert.Nil(t, costOf(dag.OpKind(200)).cost)
}
