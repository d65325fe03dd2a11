package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// TestBuiltinSourceHasSetFlagF64 checks the f64 variant of set_flag, which
// TestBuiltinSourceHasEveryVariant (f16 and bf16) does not cover: its x
// is a double, its flag an int whatever the variant.
func TestBuiltinSourceHasSetFlagF64(t *testing.T) {
	v := dag.SetFlag.Variant(dag.F64)
	require.NotNil(t, v)
	assert.Contains(t, builtinSource, `extern "C" __global__ void `+v.EntryName()+`(int* flag, i64 nflag, const double* x, i64 nx, double threshold)`)
	assert.Contains(t, builtinSource, `extern "C" __global__ void set_flag(int* flag, i64 nflag, const float* x, i64 nx, double threshold)`)
}
