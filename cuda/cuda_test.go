//go:build cgo

package cuda

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

func TestStreamPriority(t *testing.T) {
	tests := []struct {
		p               dag.Priority
		least, greatest int
		want            int
	}{
		{dag.Low, 0, -5, 0},
		{dag.Normal, 0, -5, -1},
		{dag.High, 0, -5, -2},
		{dag.Priority(4), 0, -5, -5},
		{dag.Priority(5), 0, -5, -5},
		{dag.Priority(1 << 40), 0, -5, -5},
		{dag.Priority(-3), 0, -5, 0},
		{dag.Priority(-1 << 40), 0, -5, 0},
		{dag.High, 0, 0, 0}, // a device without priorities
		{dag.Normal, 3, 1, 2},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, StreamPriority(tt.p, tt.least, tt.greatest), "priority %v in [%d, %d]", tt.p, tt.greatest, tt.least)
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&Error{Call: "cuLaunchKernel", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Msg: "invalid argument"},
			"cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument"},
		{&Error{Call: "cuInit", Code: 999}, "cuInit: CUresult (999)"},
		{&NVRTCError{Call: "nvrtcCompileProgram", Code: 6, Msg: "NVRTC_ERROR_COMPILATION", Log: "k.cu(1): error: expected a \";\""},
			"nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)\nk.cu(1): error: expected a \";\""},
		{&dag.OpError{Op: "k", Err: &AsyncError{Stream: 2, Err: &Error{Call: "cuStreamQuery", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}}},
			`op "k": cuStreamQuery: CUDA_ERROR_ILLEGAL_ADDRESS (700) (reported asynchronously by stream 2 after this op, the last on it; an earlier op may have caused it)`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
	var ce *Error
	require.ErrorAs(t, tests[3].err, &ce)
	assert.Equal(t, 700, ce.Code)
}

func TestNoDriver(t *testing.T) {
	_, err := openDriver([]string{filepath.Join(t.TempDir(), "libcuda.so.1")})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoDriver)
	assert.Contains(t, err.Error(), "DAGRUN_LIBCUDA")
}

func TestLibraryCandidates(t *testing.T) {
	assert.Equal(t, []string{"libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}, libcudaCandidates(""))
	assert.Equal(t, "/x/libcuda.so.1", libcudaCandidates("/x/libcuda.so.1")[0])

	plain := nvrtcCandidates("")
	assert.Equal(t, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, plain[:3])
	assert.Contains(t, plain, "/usr/local/cuda/lib64/libnvrtc.so.13")
	assert.Contains(t, plain, "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13")

	dir := t.TempDir()
	fromDir := nvrtcCandidates(dir)
	assert.Equal(t, filepath.Join(dir, "libnvrtc.so.13"), fromDir[0])
	assert.Equal(t, filepath.Join(dir, "libnvrtc.so.12"), fromDir[1])
	assert.Equal(t, "/opt/lib/libnvrtc.so.12.4", nvrtcCandidates("/opt/lib/libnvrtc.so.12.4")[0])
}

func TestNoNVRTC(t *testing.T) {
	_, err := openNVRTC([]string{filepath.Join(t.TempDir(), "libnvrtc.so.13")})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoNVRTC)
	assert.Contains(t, err.Error(), "DAGRUN_NVRTC")
}

func TestBuiltinSourceHasEveryBuiltin(t *testing.T) {
	for _, k := range dag.Builtins() {
		decl := `extern "C" __global__ void ` + k.Name + "("
		require.Contains(t, builtinSource, decl)
		// Buffers come as (pointer, count), then the scalars in order.
		start := strings.Index(builtinSource, decl) + len(decl)
		params := strings.Split(builtinSource[start:start+strings.Index(builtinSource[start:], ")")], ",")
		want := 0
		for _, p := range k.Params {
			want++
			if p.Kind == dag.BufferParam {
				want++
			}
		}
		if want == 0 {
			params = nil
		}
		assert.Len(t, params, want, "parameters of %s", k.Name)
	}
	assert.Contains(t, builtinSource, fill64Kernel+"(")
}

func TestCompilerCache(t *testing.T) {
	dir := t.TempDir()
	c := compiler{cacheDir: dir}
	k90 := cacheKey("src", []string{"--gpu-architecture=sm_90"})
	assert.NotEqual(t, k90, cacheKey("src", []string{"--gpu-architecture=sm_80"}))
	assert.NotEqual(t, k90, cacheKey("src2", []string{"--gpu-architecture=sm_90"}))
	assert.NotEqual(t, cacheKey("a", []string{"b"}), cacheKey("ab", nil), "the key separates source and options")

	_, ok := c.cached(k90)
	assert.False(t, ok)
	c.store(k90, image{data: []byte("cubin bytes"), cubin: true})
	img, ok := c.cached(k90)
	require.True(t, ok)
	assert.Equal(t, image{data: []byte("cubin bytes"), cubin: true}, img)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	off := compiler{}
	off.store(k90, img)
	_, ok = off.cached(k90)
	assert.False(t, ok)
}

func TestCompileWithoutNVRTC(t *testing.T) {
	c := compiler{candidates: []string{filepath.Join(t.TempDir(), "libnvrtc.so")}}
	_, err := c.compile(builtinSource, "b.cu", 9, 0)
	assert.ErrorIs(t, err, ErrNoNVRTC)
}

func TestFillPattern(t *testing.T) {
	assert.Equal(t, uint64(0x3ff0000000000000), fillPattern(dag.F64, 1))
	assert.Equal(t, uint64(0x3f800000), fillPattern(dag.F32, 1))
	assert.Equal(t, uint64(0xffffffff), fillPattern(dag.I32, -1))
	assert.Equal(t, uint64(7), fillPattern(dag.U8, 7))

	b := dag.New()
	f64 := b.Buffer("f", 64, dag.Of(dag.F64), dag.Zeros())
	i64 := b.Buffer("i", 64, dag.Of(dag.I64), dag.Zeros())
	f32 := b.Buffer("s", 64, dag.Of(dag.F32), dag.Zeros())
	tests := []struct {
		op   *dag.Op
		want bool
	}{
		{b.Fill(f64.All(), 1.5), true},
		{b.Fill(f64.All(), 0), false},
		{b.Fill(i64.All(), -1), false},
		{b.Fill(i64.All(), 5), true},
		{b.Fill(f32.All(), 1.5), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, fillNeedsKernel(tt.op), "fill %v with %v", tt.op.Access[0].Buf.DType, tt.op.FillValue)
	}
}

func TestHazardGraphCrossesStreams(t *testing.T) {
	g := hazardGraph(rand.New(rand.NewPCG(1, 2)))
	p, err := planner.New(g, planner.Streams(3))
	require.NoError(t, err)
	assert.Greater(t, p.Stats.Waits, 3)
	assert.GreaterOrEqual(t, len(p.Streams), 3)
	want := reference(t, g)
	assert.NotEqual(t, g.Buffers[0].InitialBytes(), want[g.Buffers[0]], "the ops change x")
}

// TestZeroBackend: a Backend not made by New refuses at once, without a
// driver, and closes as a no-op.
func TestZeroBackend(t *testing.T) {
	var b Backend
	_, err := b.Open(context.Background(), &dag.Graph{})
	assert.ErrorContains(t, err, "cuda.New")
	assert.NoError(t, b.Close())
	assert.Zero(t, b.Live().Total())
}
