//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCopyCollectivesNeedQueues: New refuses CopyCollectives, saying what
// to set, unless the driver is given its 32 hardware queues per device.
func TestCopyCollectivesNeedQueues(t *testing.T) {
	for _, v := range []string{"", "8", "31", "many"} {
		t.Setenv(maxConnectionsVar, v)
		_, err := New(CopyCollectives())
		require.Error(t, err, "%s=%q", maxConnectionsVar, v)
		assert.Contains(t, err.Error(), maxConnectionsVar+"=32", "%s=%q", maxConnectionsVar, v)
	}
	assert.NoError(t, copyConnections("32"))
}
