package dag

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKindTable fails when an op kind lacks its entry in kindTable, or
// the entry lacks the behaviour its facts call for.
func TestKindTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range OpKinds() {
		info := k.Info()
		assert.NotEmpty(t, info.Name, "kind %d has no entry in kindTable", k)
		assert.NotNil(t, info.check, "kind %s has no check", k)
		collective := info.Class == CollectiveClass
		assert.Equal(t, collective, info.Ordered, "%s: collectives, and only they, are ordered", k)
		assert.False(t, !collective && (info.world != nil || info.sign != nil), "%s: world checks and signatures are for collectives", k)
		assert.False(t, info.PointToPoint && info.sign == nil, "%s: a point-to-point kind signs its peer", k)
		assert.False(t, seen[info.Name], "two kinds are called %q", info.Name)
		seen[info.Name] = true
		assert.Equal(t, info.Name, k.String())
	}
	assert.False(t, OpKind(len(OpKinds())).Valid())
	assert.Equal(t, "OpKind(200)", OpKind(200).String())
}

// TestBodyKinds: the control kinds, and only they, hold bodies.
func TestBodyKinds(t *testing.T) {
	for _, k := range OpKinds() {
		switch k {
		case While:
			assert.Equal(t, Loop, k.Info().Body)
		case If:
			assert.Equal(t, Branch, k.Info().Body)
		default:
			assert.Equal(t, NoBody, k.Info().Body, "%s", k)
		}
	}
}
