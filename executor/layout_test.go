package executor_test

import (
	"testing"

	"github.com/dagrun/dagrun/internal/layouttest"
)

// TestLayout keeps the executor by job: a Session of at most 25 methods,
// whose parts (submission, timing, writes beside running work, the streams
// and events made, automatic capture) get what they use, never the
// Session; the Session's products and users (its graphs, a runner's and a
// world's sessions, a run's observation) hold it.
func TestLayout(t *testing.T) {
	layouttest.Check(t, ".", layouttest.Limits{Methods: 25, Lines: 700, Whole: "Session",
		Owners: []string{"Graph", "Runner", "World", "Rank", "Observation"}})
}
