//go:build cgo

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestNCCLMissing(t *testing.T) {
	_, err := openNCCL([]string{"/nonexistent/libnccl.so.2"})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoNCCL)
	assert.Contains(t, err.Error(), "/nonexistent/libnccl.so.2")
	assert.Contains(t, err.Error(), "DAGRUN_LIBNCCL")
}

func TestNCCLCandidates(t *testing.T) {
	c := ncclCandidates(t.TempDir())
	assert.Contains(t, c[0], "libnccl.so.2")
	assert.Equal(t, "/my/libnccl.so.2.28", ncclCandidates("/my/libnccl.so.2.28")[0])
	assert.Contains(t, ncclCandidates(""), "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2")
}

func TestNCCLVersionCode(t *testing.T) {
	for _, tt := range []struct {
		code                int
		major, minor, patch int
	}{{22803, 2, 28, 3}, {21903, 2, 19, 3}, {2804, 2, 8, 4}, {30001, 3, 0, 1}} {
		ma, mi, pa := splitNCCLVersion(tt.code)
		assert.Equal(t, []int{tt.major, tt.minor, tt.patch}, []int{ma, mi, pa}, "%d", tt.code)
	}
}

// dag.Reduction's values are passed to NCCL as they are.
func TestNCCLReductionsAreDags(t *testing.T) {
	d := ncclDeclared()
	assert.Equal(t, d["ncclSum"], int(dag.Sum))
	assert.Equal(t, d["ncclProd"], int(dag.Prod))
	assert.Equal(t, d["ncclMax"], int(dag.Max))
	assert.Equal(t, d["ncclMin"], int(dag.Min))
	assert.Equal(t, d["ncclAvg"], int(dag.Avg))
	for _, dt := range []dag.DType{dag.U8, dag.I32, dag.I64, dag.F32, dag.F64} {
		_, err := ncclDType(dt)
		assert.NoError(t, err, "%s", dt)
	}
	_, err := ncclDType(dag.DType(99))
	assert.Error(t, err)
}

// A communicator takes at most the SMs its graph's GEMMs leave to the
// collectives beside them, unless the backend's NCCL option bounds it, or
// the library cannot.
func TestNCCLResourcesFor(t *testing.T) {
	b := dag.New()
	x := b.Array("x", dag.BF16, 64*64, dag.OnDevice(0), dag.Zeros())
	y := b.Array("y", dag.BF16, 64*64, dag.OnDevice(0), dag.Zeros())
	b.Gemm(y.All(), x.All(), x.All(), dag.GemmShape{M: 64, N: 64, K: 64}, dag.Name("whole"))
	b.Gemm(x.All(), y.All(), y.All(), dag.GemmShape{M: 64, N: 64, K: 64}, dag.LeavingSMs(8), dag.Name("beside"))
	g, err := b.Build()
	require.NoError(t, err)
	for _, tc := range []struct {
		name         string
		configurable bool
		res, want    NCCLResources
	}{
		{"left by the GEMMs", true, NCCLResources{}, NCCLResources{MaxCTAs: 8}},
		{"the option wins", true, NCCLResources{MaxCTAs: 16}, NCCLResources{MaxCTAs: 16}},
		{"the option's other fields kept", true, NCCLResources{MinCTAs: 2}, NCCLResources{MinCTAs: 2, MaxCTAs: 8}},
		{"an old NCCL", false, NCCLResources{}, NCCLResources{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ncclResourcesFor(g, tc.configurable, tc.res))
		})
	}
}
