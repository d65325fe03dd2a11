//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

// TestKindTable fails when an op kind has no preparer: adding a kind to dag
// means adding its entry here.
func TestKindTable(t *testing.T) {
	for _, k := range dag.OpKinds() {
		assert.NotNil(t, preparers[k], "the cuda backend has no preparer for op kind %s", k)
	}
	assert.Len(t, preparers, len(dag.OpKinds()), "entries for kinds dag does not have")
}

// TestNCCLKinds fails when a collective kind has no NCCL call.
func TestNCCLKinds(t *testing.T) {
	for _, k := range dag.OpKinds() {
		_, ok := ncclKinds[k]
		assert.Equal(t, k.IsCollective(), ok, "%s: collectives, and only they, have an NCCL call", k)
	}
}
