package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVerifyKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := Malformed; k < numKinds; k++ {
		name := k.String()
		assert.NotContains(t, name, "Kind(", "kind %d has no name", k)
		assert.False(t, seen[name], "two kinds are called %q", name)
		seen[name] = true
	}
	assert.Equal(t, "Kind(0)", Kind(0).String())
	assert.Equal(t, "plan: wait before record: e0", (&Error{Kind: WaitBeforeRecord, Msg: "e0"}).Error())
}
