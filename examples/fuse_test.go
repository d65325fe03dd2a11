package examples_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

// The examples fuse as they stand: the MLP blocks' first GEMM takes its
// gelu, the pipeline's its bias and relu; and the MLP block splits.
func TestExamplesFuse(t *testing.T) {
	for f, want := range map[string]int{"mlp_stream.yaml": 8, "mlp_stream_small.yaml": 8, "mlp_budget.yaml": 8, "pipeline_2gpu.yaml": 4} {
		s, err := spec.Load(f)
		require.NoError(t, err)
		p, err := planner.New(s.Graph, planner.Streams(s.Run.Streams), planner.Split(planner.SplitNone), planner.Verify())
		require.NoError(t, err, f)
		assert.Len(t, p.Fused(), want, f)
		for _, id := range p.Fused() {
			assert.Equal(t, dag.Gemm, p.Graph.Ops[id].Kind)
		}
	}
	// The MLP block's first upload and GEMM, and last GEMM and download,
	// run in row blocks by default.
	s, err := spec.Load("mlp_stream.yaml")
	require.NoError(t, err)
	p, err := planner.New(s.Graph, planner.Streams(s.Run.Streams), planner.Verify())
	require.NoError(t, err)
	assert.Len(t, p.Pieces(), 4)
}

// Every example computes the same fused and split (the defaults) as with
// --fuse none --split none on the cpu backend (row blocks of a GEMM are
// the same dot products): the same bytes in f32, where an epilogue is the builtins'
// arithmetic, and in f16 and bf16, where the fused GEMM rounds once and
// the launches after each op, within 2.4 steps of the dtype (two half-step
// roundings carried by gelu's slope below 1.2, and the result's own),
// relative to the value or, near zero, to 1/16.
func TestFusedExamplesAgree(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err)
		if s.Run.World > 1 || large[f] && os.Getenv("DAGRUN_LARGE_EXAMPLES") != "1" {
			continue
		}
		t.Run(f, func(t *testing.T) {
			var out [2]executor.Results
			for i, declared := range []bool{false, true} {
				popts := []planner.Option{planner.Streams(s.Run.Streams)}
				if declared {
					popts = append(popts, planner.Fuse(planner.FuseNone), planner.Split(planner.SplitNone))
				}
				if s.Run.SharedCopyStreams {
					popts = append(popts, planner.SharedCopyStreams())
				}
				p, err := planner.New(s.Graph, popts...)
				require.NoError(t, err)
				require.NoError(t, verify.Verify(p))
				out[i], err = executor.Execute(context.Background(), cpu.New(), p)
				require.NoError(t, err)
			}
			for _, b := range s.Graph.Buffers {
				fused, apart := out[0][b], out[1][b]
				switch b.DType {
				case dag.F16, dag.BF16:
					step := 0x1p-10
					if b.DType == dag.BF16 {
						step = 0x1p-7
					}
					x, y := elems(fused, b.DType), elems(apart, b.DType)
					require.Len(t, x, len(y))
					for i := range x {
						if d := math.Abs(x[i] - y[i]); d > 2.4*step*math.Max(math.Abs(y[i]), 0x1p-4) {
							t.Fatalf("%s[%d] = %v fused, %v apart", b.Name, i, x[i], y[i])
						}
					}
				default:
					assert.Equal(t, apart, fused, "%s", b.Name)
				}
			}
		})
	}
}
