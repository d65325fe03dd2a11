//go:build cgo

package cuda

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestGemmDescriptorGPU reads back what a prepared GEMM hands cuBLASLt at
// each call: the handle cublasLtCreate made for the device, alpha and
// beta in the scale type, and, from cuBLASLt itself, the descriptor's
// transposes, epilogue and bias pointer, each in the size cuBLASLt keeps
// it in. The bias pointer is the heuristic's probe (biasProbe) until a
// call, the bias's address after one. A part of the call left unset, an
// attribute set on another descriptor or with a wrong value or size fails
// here by name, not as a status from a later cuBLASLt call (a NULL handle
// made every GEMM's heuristic answer CUBLAS_STATUS_NOT_INITIALIZED).
func TestGemmDescriptorGPU(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	for _, c := range []epilogueCase{
		{dt: dag.F32, epi: dag.NoEpilogue, layout: "batched residual"},
		{dt: dag.F64, epi: dag.NoEpilogue, layout: "plain"},
		{dt: dag.F32, epi: dag.EpiBiasGelu, layout: "plain"},
		{dt: dag.BF16, epi: dag.EpiGelu, layout: "plain"},
		{dt: dag.BF16, epi: dag.EpiBiasRelu, layout: "batched residual"},
		{dt: dag.F16, epi: dag.EpiBias, layout: "temporary bias"},
	} {
		t.Run(c.String(), func(t *testing.T) {
			g := epilogueGraph(t, c)
			p, err := planner.New(g, planner.Fuse(planner.FuseNone))
			require.NoError(t, err)
			ctx := context.Background()
			sess, err := executor.Open(ctx, b, p)
			skipNoCuBLASLt(t, err)
			require.NoError(t, err)
			defer func() { require.NoError(t, sess.Close()) }()
			se, ok := sess.Device().(*Session)
			require.True(t, ok)
			var op *dag.Op
			for _, o := range p.Graph.Ops {
				if o.Kind == dag.Gemm {
					op = o
				}
			}
			gm := se.gemms.gemm
			r := gm.recs[op.Gemm]
			require.NotNil(t, r)
			require.Empty(t, r.unfused, "cuBLASLt refused the epilogue")

			require.NotNil(t, r.c.handle, "the GEMM's handle")
			assert.Equal(t, gm.handles[0].h, r.c.handle, "the handle cublasLtCreate made for device 0")
			beta := 0.0
			if c.layout == "batched residual" {
				beta = 1
			}
			if c.dt == dag.F64 {
				assert.Equal(t, 1, int(r.c.f64))
				assert.Equal(t, 2.0/128, float64(r.c.alpha64))
				assert.Equal(t, beta, float64(r.c.beta64))
			} else {
				assert.Equal(t, 0, int(r.c.f64))
				assert.Equal(t, float32(2.0/128), float32(r.c.alpha32))
				assert.Equal(t, float32(beta), float32(r.c.beta32))
			}

			attrs, err := gm.descAttrs(r)
			require.NoError(t, err)
			assert.Len(t, attrs["TRANSA"], 4, "TRANSA: an int32_t cublasOperation_t")
			assert.Len(t, attrs["TRANSB"], 4, "TRANSB: an int32_t cublasOperation_t")
			want := make([]byte, 4)
			binary.LittleEndian.PutUint32(want, uint32(ltEpilogue(c.epi)))
			assert.Equal(t, want, attrs["EPILOGUE"], "EPILOGUE: a uint32_t cublasLtEpilogue_t")
			require.Len(t, attrs["BIAS_POINTER"], 8, "BIAS_POINTER: a pointer")
			bias := binary.LittleEndian.Uint64(attrs["BIAS_POINTER"])
			if !c.epi.HasBias() {
				assert.Zero(t, bias, "no bias without a bias epilogue")
			} else {
				assert.Equal(t, uint64(biasProbe), bias, "the heuristic's probe until a call")
			}

			require.NoError(t, sess.Run(ctx))
			attrs, err = gm.descAttrs(r)
			require.NoError(t, err)
			bias = binary.LittleEndian.Uint64(attrs["BIAS_POINTER"])
			switch {
			case !c.epi.HasBias():
				assert.Zero(t, bias)
			case c.layout == "temporary bias": // freed by now: its address was the pool's
				assert.NotEqual(t, uint64(biasProbe), bias)
				assert.Zero(t, bias%minBiasAlign)
			default:
				assert.Equal(t, uint64(se.hold.ptr(op.Access[op.Gemm.BiasAccess()].View)), bias, "the bias's address")
			}
		})
	}
}
