package executor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/layouttest"
)

// TestLayout keeps the executor by job: a Session of at most 25 methods
// (any other type at most 35), whose parts (submission, timing, writes
// beside running work, the streams and events made, automatic capture) get
// what they use, never the Session; the Session's products and users (its
// graphs, the sessions of a runner, a world and a shape, a run's
// observation) hold it.
func TestLayout(t *testing.T) {
	layouttest.Check(t, ".", layouttest.Limits{Methods: 35, Lines: 700, Whole: "Session",
		Owners: []string{"Graph", "Runner", "World", "Rank", "Observation", "shape"}})
	sh, err := layouttest.Measure(".", "Session")
	require.NoError(t, err)
	assert.LessOrEqual(t, sh.Methods["Session"], 25, "the Session's methods: give its jobs to its parts")
}
