package trace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// TestKindStylesCoverEveryKind fails when dag gains an op kind that the
// trace has no label and colours for.
func TestKindStylesCoverEveryKind(t *testing.T) {
	labels := map[string]bool{}
	for _, it := range legendItems() {
		labels[it.label] = true
	}
	for _, k := range dag.OpKinds() {
		st, ok := kindStyles[k]
		if !assert.True(t, ok, "trace has no style for op kind %s: add it to kindStyles", k) {
			continue
		}
		assert.NotEmpty(t, st.label, k.String())
		assert.Regexp(t, `^#[0-9a-f]{6}$`, st.fill, k.String())
		assert.Regexp(t, `^#[0-9a-f]{6}$`, st.text, k.String())
		assert.NotEqual(t, unknownFill, kindFill(k, planner.Compute), k.String())
		assert.True(t, labels[st.label], "the legend lacks %s", k)
	}
	assert.Len(t, kindStyles, len(dag.OpKinds()), "kindStyles has kinds dag does not")
	for _, c := range copyStyles {
		assert.Equal(t, c.fill, kindFill(dag.Copy, c.lane))
		assert.True(t, labels[c.label], "the legend lacks %s", c.label)
	}
}
