//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestActionTable checks that every action has an entry in actions: a
// name and a run, and that the actions a stretch takes are timed by
// CUPTI records.
func TestActionTable(t *testing.T) {
	names := map[string]action{}
	for a := actNone; a < numActions; a++ {
		info := a.info()
		if !assert.NotEmpty(t, info.name, "action %d has no entry", a) {
			continue
		}
		assert.NotNil(t, info.run, "action %s has no run", info.name)
		if info.step != nil {
			assert.True(t, info.records, "action %s goes in stretches but has no records", info.name)
		}
		if other, ok := names[info.name]; ok {
			t.Errorf("actions %d and %d are both named %q", other, a, info.name)
		}
		names[info.name] = a
	}
	assert.Error(t, numActions.info().run(nil, nil, nil), "an action past the table fails")
}
