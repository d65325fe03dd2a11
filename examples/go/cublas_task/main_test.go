package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/cuda"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// want is the checksum of relu(A B) computed here directly, in float64.
func want() float64 {
	a, b := inputs()
	var s float64
	for i := range m {
		for j := range n {
			var c float64
			for l := range k {
				c += float64(a[i*k+l]) * float64(b[l*n+j])
			}
			s += max(c, 0) * float64((i*n+j)%13+1)
		}
	}
	return s
}

func TestCublasTask(t *testing.T) {
	tests := []struct {
		backend string
		replays int
	}{
		{"cpu", 0},
		{"cpu", 3},
	}
	w := want()
	require.NotZero(t, w)
	for _, tt := range tests {
		var out bytes.Buffer
		sums, err := run(context.Background(), &out, tt.backend, tt.replays)
		require.NoError(t, err)
		require.Len(t, sums, 1+tt.replays)
		for _, s := range sums {
			assert.Equal(t, w, s)
		}
		assert.Equal(t, 1+tt.replays, strings.Count(out.String(), "checksum"))
	}
}

func TestUnknownBackend(t *testing.T) {
	_, err := run(context.Background(), &bytes.Buffer{}, "tpu", 1)
	assert.ErrorContains(t, err, `unknown backend "tpu"`)
}

// On a GPU the task calls cuBLAS and prints the CPU's checksum. It skips
// without a driver and fails instead with DAGRUN_REQUIRE_GPU=1.
func TestCublasTaskCUDA(t *testing.T) {
	var out bytes.Buffer
	sums, err := run(context.Background(), &out, "cuda", 2)
	if errors.Is(err, cuda.ErrNoDriver) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
		t.Skipf("no GPU: %v", err)
	}
	require.NoError(t, err)
	w := want()
	for _, s := range sums {
		assert.Equal(t, w, s)
	}
	t.Log(out.String())
}
