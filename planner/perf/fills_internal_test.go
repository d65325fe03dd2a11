package perf

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/dag"
)

func TestFills(t *testing.T) {
	launch := func(grid, block int) *dag.Op {
		return &dag.Op{Kind: dag.Launch, Launch: &dag.LaunchSpec{Grid: dag.Grid1(grid), Block: dag.Grid1(block)}}
	}
	gemm := func(m, n, batch int64) *dag.Op {
		return &dag.Op{Kind: dag.Gemm, Gemm: &dag.GemmSpec{GemmShape: dag.GemmShape{M: m, N: n, K: 64}, Batch: batch}}
	}
	for _, c := range []struct {
		name string
		op   *dag.Op
		sms  int
		want bool
	}{
		{"gelu of the MLP: 1056 x 256 threads", launch(1056, 256), 132, true},
		{"half of every SM's threads", launch(528, 256), 132, true},
		{"a block short of half", launch(527, 256), 132, false},
		{"the same kernel on a device of 108 SMs", launch(527, 256), 108, true},
		{"many threads in too few blocks", launch(131, 1024), 132, false},
		{"a 1024-thread block on every SM", launch(132, 1024), 132, true},
		{"spin of the priority example: 1024 x 1024", launch(1024, 1024), 132, true},
		{"one block", launch(1, 32), 132, false},
		{"no launch spec", &dag.Op{Kind: dag.Launch}, 132, false},
		{"huge grid and block counts do not overflow", launch(1<<30, 1<<30), 132, true},
		{"MLP up GEMM: 16 x 128 tiles", gemm(2048, 16384, 1), 132, true},
		{"one 128-row tile wide but 132 tiles tall", gemm(132*128, 64, 1), 132, true},
		{"MLP down GEMM at T = 512: 4 x 32 tiles, 4 SMs idle", gemm(512, 4096, 1), 132, true},
		{"116 tiles: an eighth of the SMs idle", gemm(116*128, 64, 1), 132, true},
		{"115 tiles: more than an eighth idle", gemm(115*128, 64, 1), 132, false},
		{"a 1024 square GEMM: 64 tiles", gemm(1024, 1024, 1), 132, false},
		{"the same batched three times", gemm(1024, 1024, 3), 132, true},
		{"a tiny GEMM", gemm(64, 64, 1), 132, false},
		{"a tiny GEMM batched a thousand times", gemm(64, 64, 1000), 132, true},
		{"no gemm spec", &dag.Op{Kind: dag.Gemm}, 132, false},
		{"a copy never fills", &dag.Op{Kind: dag.Copy}, 132, false},
		{"a host step never fills", &dag.Op{Kind: dag.Host}, 132, false},
	} {
		assert.Equal(t, c.want, Fills(c.op, c.sms), c.name)
	}
}
