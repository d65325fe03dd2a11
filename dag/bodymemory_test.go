package dag_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// allocated is the number of bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBodyMemoryIsLinear: a loop or branch body of one or two ops costs
// about what those ops cost in a flat graph, whatever the number of
// buffers around it, not a chunk of slabs, a block of dependencies or an
// index of every buffer of the graph (a 3 MB spec of 30,000 ifs once took
// a gigabyte to validate).
func TestBodyMemoryIsLinear(t *testing.T) {
	const bodies, buffers = 2000, 2000
	declare := func(nested bool) func() {
		return func() {
			b := dag.New()
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
			xs := make([]*dag.Buffer, buffers)
			for i := range xs {
				xs[i] = b.Buffer(fmt.Sprint("x", i), 64, dag.Zeros())
			}
			for i := range bodies {
				x := xs[i%buffers]
				if !nested {
					b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 2)
					b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 2)
					continue
				}
				b.If(flag.All(), func(then *dag.Builder) {
					then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 2)
					then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(1), x, 2)
				}, nil)
			}
			_, err := b.Build()
			require.NoError(t, err)
		}
	}
	flat := allocated(declare(false))
	nested := allocated(declare(true))
	t.Logf("flat %d bytes, %d single-if bodies %d bytes", flat, bodies, nested)
	assert.Less(t, nested, 3*flat, "bodies cost a small constant more than flat ops")
}
