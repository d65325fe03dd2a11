package trace_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// innerLoops is the trace of a top-level loop (Index 0) whose one pass
// runs n loops (Index 1..n) of two iterations each, each iteration one
// slice of an op (Index n+i) on one lane: the shape whose brackets once
// took a pass over every slice per inner loop.
func innerLoops(n int) *trace.Trace {
	tr := &trace.Trace{Lanes: []trace.Lane{{Name: "dev0.normal.compute0", Kind: planner.Compute}}}
	tr.Loops = append(tr.Loops, trace.LoopRun{Op: 0, Name: "outer", Iterations: 1})
	for i := 1; i <= n; i++ {
		tr.Loops = append(tr.Loops, trace.LoopRun{Op: i, Name: fmt.Sprint("in", i), Iterations: 2})
		for it := range 2 {
			at := time.Duration(4*i+2*it) * time.Microsecond
			tr.Slices = append(tr.Slices, trace.Slice{Op: n + i, Name: fmt.Sprint("op", i), Kind: dag.Launch,
				Start: at, Dur: time.Microsecond, Loop: true, Iter: it, Holder: 0, Parent: i})
		}
	}
	return tr
}

// TestBracketsOfManyInnerLoops: every inner loop gets its own bracket over
// its two iterations, and the outer loop one over them all.
func TestBracketsOfManyInnerLoops(t *testing.T) {
	const n = 2000
	var buf strings.Builder
	require.NoError(t, innerLoops(n).WriteSVG(&buf))
	els := parseSVG(t, buf.String())
	require.Equal(t, n+1, countClass(els, "loop"))
	seen := 0
	for i, e := range els {
		if e.class != "loop" || e.attrs["data-op"] == "outer" {
			continue
		}
		seen++
		assert.Equal(t, "2", e.attrs["data-iterations"], e.attrs["data-op"])
		var k int
		_, err := fmt.Sscanf(e.attrs["data-op"], "in%d", &k)
		require.NoError(t, err)
		assert.Contains(t, els[i+1].text, fmt.Sprintf("loop in%d: 2 iterations from", k))
		assert.Contains(t, els[i+1].text, "1.50 µs each on average", "its own two slices, 3 µs")
	}
	assert.Equal(t, n, seen)
}

// BenchmarkBracketsOfManyInnerLoops draws the timeline of 20,000 inner
// loops: linear in the slices, where a pass per inner loop was quadratic.
func BenchmarkBracketsOfManyInnerLoops(b *testing.B) {
	tr := innerLoops(20000)
	for b.Loop() {
		if err := tr.WriteSVG(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
