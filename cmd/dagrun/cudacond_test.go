package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCudaConditionRequired: where the CUDA backend does not open, the
// [cuda] condition is false, and an error under DAGRUN_REQUIRE_GPU=1, so
// that the GPU machine's run of the scripts cannot take the [!cuda] lines
// for a driver that failed to load.
func TestCudaConditionRequired(t *testing.T) {
	t.Setenv("DAGRUN_REQUIRE_GPU", "1")
	ok, err := cudaCondition()
	if ok {
		require.NoError(t, err, "a GPU is here: the condition holds")
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DAGRUN_REQUIRE_GPU=1, but the cuda backend does not open")
	t.Setenv("DAGRUN_REQUIRE_GPU", "")
	ok, err = cudaCondition()
	require.NoError(t, err)
	assert.False(t, ok)
}
