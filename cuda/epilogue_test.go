//go:build cgo

package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// Every epilogue has its cuBLASLt value; the bias epilogues have the
// BIAS bit, which the C side reads to know a bias pointer is due.
func TestLtEpilogue(t *testing.T) {
	want := map[dag.Epilogue]uint32{dag.NoEpilogue: 1, dag.EpiBias: 4, dag.EpiGelu: 32, dag.EpiRelu: 2, dag.EpiBiasGelu: 36, dag.EpiBiasRelu: 6}
	for _, e := range dag.Epilogues() {
		v := uint32(ltEpilogue(e))
		assert.Equal(t, want[e], v, "%s", e)
		if e != dag.NoEpilogue {
			assert.Equal(t, e.HasBias(), v&4 != 0, "%s", e)
		}
	}
}

// A bias aligned to less than 16 bytes is not handed to cuBLASLt.
func TestEpilogueRefusal(t *testing.T) {
	bd := dag.New()
	dev := dag.OnDevice(0)
	a := bd.Buffer("a", 4*8*4, dev, dag.Zeros())
	w := bd.Buffer("w", 8*16*4, dev, dag.Zeros())
	c := bd.Buffer("c", 4*16*4, dev, dag.Zeros())
	bias := bd.Buffer("bias", 20*4, dev, dag.Zeros())
	sh := dag.GemmShape{M: 4, N: 16, K: 8}
	bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBiasGelu), dag.Bias(bias.Slice(16, 64))).With(dag.Name("aligned"))
	bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiBiasRelu), dag.Bias(bias.Slice(4, 64))).With(dag.Name("skewed"))
	bd.Gemm(c.All(), a.All(), w.All(), sh, dag.WithEpilogue(dag.EpiGelu)).With(dag.Name("no bias"))
	g, err := bd.Build()
	require.NoError(t, err)
	assert.Empty(t, epilogueRefusal(g.Ops[0]))
	assert.Equal(t, "the bias bias[4:68] is aligned to 4 bytes, below the 16 dagrun hands cuBLASLt", epilogueRefusal(g.Ops[1]))
	assert.Empty(t, epilogueRefusal(g.Ops[2]))
}

// Only cuBLASLt refusing an epilogue (no algorithm, no heuristic) runs the
// product without it; any other failure of the fused attempt is the op's,
// reported as it is: the unfused product would fail alike, as every GEMM
// did with the NULL handle (CUBLAS_STATUS_NOT_INITIALIZED), and the
// fallback hid the first failure behind the second.
func TestRefusedEpilogue(t *testing.T) {
	assert.True(t, refusedEpilogue(fmt.Errorf("%w for the f32 gemm 4x16x8 on device 0 (H200)", errNoAlgorithm)))
	assert.True(t, refusedEpilogue(&CuBLASError{Call: "cublasLtMatmulAlgoGetHeuristic", Status: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED"}))
	for _, st := range []int{1, 3, 7, 13, 14} { // not initialized, alloc failed, invalid value, execution failed, internal error
		assert.False(t, refusedEpilogue(&CuBLASError{Call: "cublasLtMatmulAlgoGetHeuristic", Status: st}), "status %d", st)
	}
	assert.False(t, refusedEpilogue(fmt.Errorf("%w: workspace of 1024 bytes for cuBLASLt: out of memory", errCUDA)))
	assert.False(t, refusedEpilogue(errors.New("no cublasLtCreate handle for the context of device 0")))
}

// The heuristic's bias pointer is aligned to minBiasAlign, and no more:
// what Run holds every bias to.
func TestBiasProbe(t *testing.T) {
	assert.Zero(t, biasProbe%minBiasAlign)
	assert.NotZero(t, biasProbe%(2*minBiasAlign))
}

func TestHalfSteps(t *testing.T) {
	one, next := dag.BF16FromFloat32(1), dag.BF16FromFloat32(1+1.0/128)
	assert.Equal(t, int64(1), halfSteps(one, next))
	assert.Equal(t, int64(0), halfSteps(0x8000, 0), "-0 and +0")
	assert.Equal(t, int64(2), halfSteps(0x8001, 1), "across zero")
	assert.Equal(t, int64(0), halfSteps(one, one))
}
