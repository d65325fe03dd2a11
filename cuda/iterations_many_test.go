//go:build cgo

package cuda

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// manyIterations are the records of a loop (op 2, after ops 0 and 1)
// whose body's ops 3.. run iters times, body ops an iteration, the first
// of them launching two kernels and the last setting the condition; the eager run's come first, then
// replay 7's; and the loop index that goes with them.
func manyIterations(iters, body int) ([]activityRecord, *loopIndex, int) {
	n := 3 + body
	li := &loopIndex{of: make([]int32, n), bounds: make([]bool, n), cond: make([]int32, n)}
	for i := range n {
		li.of[i], li.cond[i] = notInBody, notInBody
		if i >= 3 {
			li.of[i] = 2
		}
	}
	li.bounds[2], li.cond[n-1] = true, 2
	var recs []activityRecord
	t := uint64(1000)
	k := func(replay, op int64) {
		recs = append(recs, activityRecord{Kind: activityKernel, Replay: replay, Op: op, Start: t, End: t + 500, GraphNodeID: uint64(op + 1)})
		t += 1000
	}
	for _, replay := range []int64{-1, 7} {
		k(replay, 0)
		k(replay, 1)
		k(replay, 2) // the loop's enter kernel
		for range iters {
			k(-1, 3) // op 3 launches two kernels
			for op := 3; op < n; op++ {
				k(-1, int64(op)) // a body's records name no launch
			}
		}
	}
	return recs, li, n
}

// Every iteration of a loop of many gives each body op a span, in an
// eager run and in a replay, and the loop's span covers them all; the
// same spans come from records in any order.
func TestCUPTIManyIterations(t *testing.T) {
	type span struct {
		replay, op int
		start, end time.Duration
	}
	read := func(recs []activityRecord, li *loopIndex, n int) []span {
		c := &cuptiTiming{origin: 100, loops: li, ops: []cuptiOp{{op: 0}, {op: 1}, {op: 2}}}
		for op := range n {
			c.setStream(op, 0)
		}
		var got []span
		c.spans(recs, 1<<16, func(replay, op, stream int, start, end time.Duration) {
			got = append(got, span{replay, op, start, end})
		})
		assert.Zero(t, c.unnamed)
		return got
	}
	for _, iters := range []int{1, 2, 1000} {
		const body = 4
		recs, li, n := manyIterations(iters, body)
		got := read(slices.Clone(recs), li, n)
		count := map[[2]int]int{}
		var loopSpan [2]time.Duration
		for _, sp := range got {
			count[[2]int{sp.replay, sp.op}]++
			if sp.replay < 0 && sp.op == 2 {
				loopSpan = [2]time.Duration{sp.start, sp.end}
			}
		}
		for op := 3; op < n; op++ {
			assert.Equal(t, iters, count[[2]int{-1, op}], "%d iterations: eager spans of body op %d", iters, op)
			assert.Equal(t, iters, count[[2]int{7, op}], "%d iterations: replayed spans of body op %d", iters, op)
		}
		assert.Equal(t, 1, count[[2]int{-1, 2}])
		// From the enter kernel to the last iteration's setter.
		last := uint64(1000 + 1000*(2+iters*(body+1)))
		assert.Equal(t, [2]time.Duration{1000 + 2000 - 100, time.Duration(last + 500 - 100)}, loopSpan, "%d iterations", iters)

		shuffled := slices.Clone(recs)
		rand.New(rand.NewPCG(1, uint64(iters))).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		assert.ElementsMatch(t, got, read(shuffled, li, n), "%d iterations, records shuffled", iters)
		slices.Reverse(shuffled)
		assert.ElementsMatch(t, got, read(shuffled, li, n), "%d iterations, records reversed", iters)
	}
}

// BenchmarkLoopSpans reads the spans of an eager run, and of a replay,
// of a loop of 1,000 iterations of 11 kernels: what TestLoopTraceGPU
// traces.
func BenchmarkLoopSpans(b *testing.B) {
	recs, li, n := manyIterations(1000, 10) // 11 kernels an iteration
	half := len(recs) / 2
	for _, run := range []struct {
		name string
		recs []activityRecord
	}{{"eager", recs[:half]}, {"replay", recs[half:]}} {
		b.Run(run.name, func(b *testing.B) {
			work := make([]activityRecord, len(run.recs), 2*len(run.recs))
			c := &cuptiTiming{origin: 100, loops: li}
			for b.Loop() {
				c.ops = append(c.ops[:0], cuptiOp{op: 0}, cuptiOp{op: 1}, cuptiOp{op: 2})
				for op := range n {
					c.setStream(op, 0)
				}
				copy(work, run.recs)
				c.spans(work, 1<<16, func(replay, op, stream int, start, end time.Duration) {})
			}
		})
	}
}
