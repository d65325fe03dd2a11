package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/verify"
)

// Every op kind has the planner's facts: a stream pool. A kind added to
// dag without an entry here fails this test.
func TestKindTableCoversEveryKind(t *testing.T) {
	for _, k := range dag.OpKinds() {
		f := factsOf(k)
		assert.NotNil(t, f.pool, "kind %s has no stream pool in the planner's kind table", k)
		if f.pool == nil {
			continue
		}
		// The pool follows the kind's stream class.
		if k.Info().Class == dag.ComputeClass {
			assert.Equal(t, Compute, f.pool(&dag.Op{Kind: k}, false), "kind %s", k)
		}
	}
	assert.Nil(t, factsOf(dag.OpKind(200)).pool)
}

// A kind flagged as ordered keeps its declaration order under list
// scheduling even when the costs say otherwise: here the later-declared of
// three independent launches is the longest, and would go first.
func TestOrderedKindsKeepDeclarationOrder(t *testing.T) {
	b := dag.New()
	one := dag.Grid1(1)
	for i, cost := range []time.Duration{time.Microsecond, 5 * time.Microsecond, 50 * time.Microsecond} {
		x := b.Buffer(string(rune('a'+i)), 64, dag.Zeros())
		b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(cost))
	}
	g, err := b.Build()
	require.NoError(t, err)
	opts, err := Options{Streams: 1}.withDefaults()
	require.NoError(t, err)

	free := planOne(g, opts, byEarliestStart, nil)
	assert.Equal(t, []int32{2, 1, 0}, runOrder(free), "longest first when nothing is ordered")

	ordered := planOne(g, opts, byEarliestStart, func(k dag.OpKind) bool { return k == dag.Launch })
	assert.Equal(t, []int32{0, 1, 2}, runOrder(ordered), "declaration order for an ordered kind")
	require.NoError(t, verify.Verify(ordered))
}

func runOrder(p *Plan) []int32 {
	var ops []int32
	for _, st := range p.Steps {
		if st.Kind == Run {
			ops = append(ops, st.Op)
		}
	}
	return ops
}
