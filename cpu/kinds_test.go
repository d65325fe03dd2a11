package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

// TestKindTable fails when an op kind has no implementation here: adding a
// kind to dag means adding its entry to kinds.
func TestKindTable(t *testing.T) {
	for _, k := range dag.OpKinds() {
		impl, ok := kinds[k]
		if assert.True(t, ok, "the cpu backend has no entry for op kind %s in kinds", k) {
			assert.NotNil(t, impl.check, "%s: check", k)
			assert.NotNil(t, impl.exec, "%s: exec", k)
			assert.Equal(t, impl.resolve != nil, k.Info().Lifetime != dag.NoLifetime, "%s: lifetime kinds, and only they, resolve on their own", k)
			assert.Equal(t, impl.commit != nil, k.Info().Lifetime != dag.NoLifetime, "%s: lifetime kinds, and only they, commit", k)
			assert.Equal(t, impl.collective != nil, k.IsCollective(), "%s: collectives, and only they, run through a world", k)
		}
	}
	assert.Len(t, kinds, len(dag.OpKinds()), "entries for kinds dag does not have")
}

// TestBuiltinTable fails when a kernel of the builtin library has no Go
// version here.
func TestBuiltinTable(t *testing.T) {
	for _, k := range dag.Builtins() {
		assert.NotNil(t, builtinFuncs[k], "the cpu backend has no Go version of builtin kernel %s", k.Name)
	}
	assert.Len(t, builtinFuncs, len(dag.Builtins()))
}
