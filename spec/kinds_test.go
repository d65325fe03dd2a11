package spec

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

// Every op kind of dag has an entry in the spec's table: a key that is the
// kind's name and that the loader accepts, or a reason why a spec cannot
// write it.
func TestKindKeys(t *testing.T) {
	keyed := 0
	for _, k := range dag.OpKinds() {
		e, ok := kindKeys[k]
		if !assert.True(t, ok, "op kind %s has no entry in kindKeys", k) {
			continue
		}
		if e.key == "" {
			assert.NotEmpty(t, e.why, "op kind %s has neither a key nor a reason", k)
			continue
		}
		keyed++
		assert.Equal(t, k.Info().Name, e.key, "the key of %s", k)
		assert.True(t, slices.Contains(opKindKeys, e.key), "%s is not among opKindKeys", e.key)
	}
	assert.Len(t, opKindKeys, keyed, "opKindKeys and kindKeys list the same kinds")
}
