package dagtest_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

func TestRandomControlShapes(t *testing.T) {
	loops, branches, nested := 0, 0, 0
	for seed := range int64(40) {
		c := dagtest.RandomControl(seed, 12, 2)
		again := dagtest.RandomControl(seed, 12, 2)
		assert.Equal(t, c.Want, again.Want, "seed %d is deterministic", seed)
		var names []string
		c.Graph.Walk(func(o *dag.Op) {
			names = append(names, o.Name)
			switch o.Kind {
			case dag.While:
				loops++
				assert.EqualValues(t, 8, o.Control.Max)
			case dag.If:
				branches++
			}
			if o.Index >= len(c.Graph.Ops) && len(o.Bodies()) > 0 {
				nested++
			}
		})
		var againNames []string
		again.Graph.Walk(func(o *dag.Op) { againNames = append(againNames, o.Name) })
		assert.Equal(t, names, againNames)
		for name, n := range c.Trips {
			assert.LessOrEqual(t, n, 4*5*5, "%s: at most 4 trips a run of it", name)
		}
		for name, v := range c.Want {
			for i, x := range v {
				require.False(t, math.IsNaN(float64(x)) || math.Abs(float64(x)) > 4, "%s[%d] = %v", name, i, x)
			}
		}
	}
	assert.Positive(t, loops)
	assert.Positive(t, branches)
	assert.Positive(t, nested, "bodies hold loops and branches too")
}

// TestRandomControlOnCPU runs the graphs on the cpu backend and compares
// every buffer with the reference.
func TestRandomControlOnCPU(t *testing.T) {
	for seed := range int64(12) {
		c := dagtest.RandomControl(seed, 10, 2)
		p, err := planner.New(c.Graph, planner.Streams(3))
		require.NoError(t, err)
		out, err := executor.Execute(context.Background(), cpu.New(), p)
		require.NoError(t, err)
		for b, data := range out {
			want := c.Want[b.Name]
			require.NotNil(t, want, b.Name)
			for i := range want {
				var got float32
				if b.DType == dag.I32 {
					got = float32(int32(binary.LittleEndian.Uint32(data[4*i:])))
				} else {
					got = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
				}
				require.Equal(t, want[i], got, "seed %d: %s[%d]", seed, b.Name, i)
			}
		}
	}
}
