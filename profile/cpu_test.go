package profile_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
)

// The estimate of the examples: the GPU-sized MLP block is minutes on the
// CPU, its small twin and the others well under a second.
func TestEstimateCPU(t *testing.T) {
	for _, tc := range []struct {
		file     string
		min, max time.Duration
	}{
		{"mlp_stream.yaml", 5 * time.Minute, 15 * time.Minute},
		{"mlp_stream_small.yaml", 0, time.Second},
		{"fan_out.yaml", 0, time.Second},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s, err := spec.Load(filepath.Join("..", "examples", tc.file))
			require.NoError(t, err)
			e := profile.EstimateCPU(s.Graph)
			assert.GreaterOrEqual(t, e.Time, tc.min)
			assert.Less(t, e.Time, tc.max)
		})
	}
}

func ExampleEstimateCPU() {
	s, err := spec.Load(filepath.Join("..", "examples", "mlp_stream.yaml"))
	if err != nil {
		panic(err)
	}
	e := profile.EstimateCPU(s.Graph)
	fmt.Printf("%.2f TFLOP, about %.0f minutes\n", e.Flops/1e12, e.Time.Minutes())
	// Output: 4.40 TFLOP, about 7 minutes
}
