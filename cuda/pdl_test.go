//go:build cgo

package cuda

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binding of cuLaunchKernelEx (cuda.h) against the layout read from the
// driver's cuda.h of CUDA 12.3 to 13.0: CUlaunchAttribute is an id, 4 bytes
// of padding and a union of char pad[64] that holds pointers; CUlaunchConfig
// is seven unsigned ints, the stream, the attributes and their count. A
// wrong layout would crash the first early launch, so it is checked here
// on every build, and against the real header where there is one
// (TestPDLBindingMatchesHeaders).
func TestPDLBindingLayout(t *testing.T) {
	want := map[string]int64{
		"CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION":                        6,
		"sizeof(CUlaunchAttributeID)":                                                  4,
		"sizeof(CUlaunchAttribute)":                                                    72,
		"offsetof(CUlaunchAttribute, value)":                                           8,
		"sizeof(CUlaunchAttributeValue)":                                               64,
		"offsetof(CUlaunchAttributeValue, programmaticStreamSerializationAllowed)":     0,
		"sizeof(((CUlaunchAttributeValue*)0)->programmaticStreamSerializationAllowed)": 4,
		"sizeof(CUlaunchConfig)":                                                       56,
		"offsetof(CUlaunchConfig, gridDimX)":                                           0,
		"offsetof(CUlaunchConfig, blockDimX)":                                          12,
		"offsetof(CUlaunchConfig, sharedMemBytes)":                                     24,
		"offsetof(CUlaunchConfig, hStream)":                                            32,
		"offsetof(CUlaunchConfig, attrs)":                                              40,
		"offsetof(CUlaunchConfig, numAttrs)":                                           48,
	}
	got := map[string]int64{}
	for _, v := range pdlBinding() {
		got[v.Expr] = v.Value
	}
	assert.Equal(t, want, got)
}

// TestPDLBindingMatchesHeaders builds testdata/pdl_check.c against the
// driver's cuda.h, with every value of pdlBinding to compare.
func TestPDLBindingMatchesHeaders(t *testing.T) {
	checkBinding(t, "pdl_check.c", "cuda.h", pdlBinding(), "")
}

// Early launches need cuLaunchKernelEx, a driver that captures them (CUDA
// 12.3) and a device of compute capability 9.0 or later; each refusal says
// which.
func TestPDLUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name         string
		version      int
		ex           bool
		major, minor int
		want         string
	}{
		{"H200 on CUDA 13.0", 13000, true, 9, 0, ""},
		{"Blackwell", 12080, true, 10, 0, ""},
		{"CUDA 12.3", 12030, true, 9, 0, ""},
		{"no cuLaunchKernelEx", 11070, false, 9, 0, "the driver (CUDA 11.7) has no cuLaunchKernelEx"},
		{"CUDA 12.2", 12020, true, 9, 0, "the driver (CUDA 12.2) does not capture programmatic dependent launches into graphs (CUDA 12.3 or newer)"},
		{"A100", 13000, true, 8, 0, "GPU (compute capability 8.0) has no programmatic dependent launch (9.0 or newer)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pdlUnsupported(tc.version, tc.ex, "GPU", tc.major, tc.minor))
		})
	}
}

// Every builtin kernel waits for its producer before it touches memory:
// dagrun_pdl is the first statement of each, so a launch the planner marks
// early can never read a producer's output too soon.
func TestBuiltinsWaitForProducer(t *testing.T) {
	entry := regexp.MustCompile(`extern "C" __global__ void (\w+)\([^)]*\) \{\s*(\S+)`)
	ms := entry.FindAllStringSubmatch(builtinSource, -1)
	require.Equal(t, strings.Count(builtinSource, "__global__"), len(ms), "every kernel's entry is matched")
	require.GreaterOrEqual(t, len(ms), 30)
	for _, m := range ms {
		assert.Equal(t, "dagrun_pdl();", m[2], "kernel %s", m[1])
	}
	assert.Contains(t, builtinSource, `asm volatile("griddepcontrol.wait;" ::: "memory");`)
	assert.Contains(t, builtinSource, "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900")
}
