package dag

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKindInfoCoversEveryKind(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range OpKinds() {
		info := k.Info()
		assert.NotEmpty(t, info.Name, "kind %d has no entry in kindInfo", k)
		assert.False(t, seen[info.Name], "two kinds are called %q", info.Name)
		seen[info.Name] = true
		assert.Equal(t, info.Name, k.String())
	}
	assert.False(t, OpKind(len(OpKinds())).Valid())
	assert.Equal(t, "OpKind(200)", OpKind(200).String())
}

func TestKindChecksCoverEveryKind(t *testing.T) {
	for _, k := range OpKinds() {
		assert.NotNil(t, kindChecks[k], "kind %s has no entry in kindChecks", k)
	}
}
