package executor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/planner"
)

// The plan cache forgets the least recently opened plan beyond its bound;
// a plan asked for again is the most recent.
func TestPlanCache(t *testing.T) {
	c := planCache{max: 2}
	a, b, d := &planner.Plan{}, &planner.Plan{}, &planner.Plan{}
	c.put("a", a)
	c.put("b", b)
	assert.Same(t, a, c.get("a"), "a is now the most recent")
	c.put("d", d)
	assert.Nil(t, c.get("b"), "b, the least recent, is forgotten")
	assert.Same(t, a, c.get("a"))
	assert.Same(t, d, c.get("d"))
	c.put("d", d)
	assert.Equal(t, []string{"a", "d"}, c.keys, "putting a plan kept again keeps one entry")
}
