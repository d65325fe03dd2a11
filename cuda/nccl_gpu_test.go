//go:build cgo

package cuda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/comm"
)

// Multi-GPU tests skip without a driver, NCCL or 2 devices, and fail
// instead where DAGRUN_REQUIRE_GPUS=N (N >= 2) says the machine has N GPUs. Every
// test sets NCCL_NVLS_ENABLE=0 before NCCL starts: NVLink multicast can
// take a shared host's GPUs out of service.

func requireTwo() bool { return requiredGPUs() >= 2 }

// requiredGPUs is DAGRUN_REQUIRE_GPUS: how many GPUs the machine must
// have (0: none required).
func requiredGPUs() int {
	n, err := strconv.Atoi(os.Getenv("DAGRUN_REQUIRE_GPUS"))
	if err != nil {
		return 0
	}
	return n
}

func skipOrFailNCCL(tb testing.TB, required bool, format string, a ...any) {
	tb.Helper()
	if required {
		tb.Fatalf(format, a...)
	}
	tb.Skipf(format, a...)
}

// twoGPUs is what the multi-GPU tests hold: devices 0 and 1, their primary
// contexts and a stream on each, and NCCL.
type twoGPUs struct {
	drv     *driver
	nccl    *ncclLib
	devs    []cuDevice
	ctxs    []cuContext
	streams []cuStream
}

func openTwoGPUs(tb testing.TB) *twoGPUs {
	tb.Helper()
	os.Setenv("NCCL_NVLS_ENABLE", "0")
	drv, err := openDriver(libcudaCandidates(os.Getenv("DAGRUN_LIBCUDA")))
	if err != nil {
		skipOrFailNCCL(tb, requireTwo(), "no driver: %v", err)
	}
	tb.Cleanup(drv.close)
	n, err := drv.deviceCount()
	require.NoError(tb, err)
	if n < 2 {
		skipOrFailNCCL(tb, requireTwo(), "%d device(s); the test needs 2", n)
	}
	lib, err := openNCCL(ncclCandidates(os.Getenv("DAGRUN_LIBNCCL")))
	if err != nil {
		skipOrFailNCCL(tb, requireTwo(), "%v", err)
	}
	tb.Cleanup(lib.close)
	tb.Logf("NCCL %s from %s", lib.Version(), lib.path)
	g := &twoGPUs{drv: drv, nccl: lib}
	for d := range 2 {
		info, err := drv.device(d)
		require.NoError(tb, err)
		ctx, err := drv.retainPrimary(info.dev)
		require.NoError(tb, err)
		tb.Cleanup(func() { drv.releasePrimary(info.dev) })
		s, err := drv.streams.create(ctx, 0)
		require.NoError(tb, err)
		tb.Cleanup(func() { drv.streams.destroy(ctx, s) })
		g.devs, g.ctxs, g.streams = append(g.devs, info.dev), append(g.ctxs, ctx), append(g.streams, s)
	}
	return g
}

func (g *twoGPUs) alloc(tb testing.TB, d int, n int64) cuDevptr {
	tb.Helper()
	p, err := g.drv.memAlloc(g.ctxs[d], n)
	require.NoError(tb, err)
	tb.Cleanup(func() { g.drv.memFree(g.ctxs[d], p) })
	return p
}

func (g *twoGPUs) sync(tb testing.TB) {
	tb.Helper()
	for d := range 2 {
		require.NoError(tb, g.drv.ctxSync(g.ctxs[d]))
	}
}

func (g *twoGPUs) comms(tb testing.TB) []*ncclComm {
	tb.Helper()
	comms, err := g.nccl.initAll([]int{0, 1})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		for _, c := range comms {
			c.destroy()
		}
	})
	return comms
}

// TestNCCLHeader compiles testdata/nccl_check.c against the real nccl.h
// (and cuda.h where present) and compares every value and size the binding
// declares by hand: NCCL's, and where cuda.h is found the peer helpers'
// and the pool measure's.
func TestNCCLHeader(t *testing.T) {
	required := requireTwo() || os.Getenv("DAGRUN_REQUIRE_GPU") == "1"
	inc := os.Getenv("DAGRUN_NCCL_INCLUDE")
	if inc == "" {
		inc = "/usr/include"
	}
	if _, err := os.Stat(filepath.Join(inc, "nccl.h")); err != nil {
		skipOrFailNCCL(t, required, "no nccl.h in %s (set DAGRUN_NCCL_INCLUDE): %v", inc, err)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		skipOrFailNCCL(t, required, "no gcc: %v", err)
	}
	args := []string{"-I" + inc}
	want := ncclDeclared()
	if cudaInc := "/usr/local/cuda/include"; fileExists(filepath.Join(cudaInc, "cuda.h")) {
		args = append(args, "-I"+cudaInc, "-DHAVE_CUDA_H")
		maps.Copy(want, peerDeclared())
		maps.Copy(want, poolDeclared()) // poolwatch.go
	}
	bin := filepath.Join(t.TempDir(), "nccl_check")
	out, err := exec.Command(gcc, append(args, "testdata/nccl_check.c", "-o", bin)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	got := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 2, "line %q", sc.Text())
		v, err := strconv.Atoi(f[1])
		require.NoError(t, err)
		got[f[0]] = v
	}
	assert.Equal(t, want, got, "the hand declarations of cuda/nccl.h and cuda/peer.go must match the real headers")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestCaptureProbe builds and runs testdata/capture_probe.c: raw C proving
// that a capture across 2 devices with a grouped NCCL all-reduce replays
// correctly.
func TestCaptureProbe(t *testing.T) {
	required := requireTwo()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		skipOrFailNCCL(t, required, "no gcc: %v", err)
	}
	if !fileExists("/usr/local/cuda/include/cuda.h") || !fileExists("/usr/include/nccl.h") {
		skipOrFailNCCL(t, required, "no CUDA toolkit headers or nccl.h to build the probe")
	}
	bin := filepath.Join(t.TempDir(), "capture_probe")
	args := []string{"-I/usr/local/cuda/include", "testdata/capture_probe.c", "-o", bin,
		"-L/usr/local/cuda/lib64/stubs", "-lcuda", "-L/usr/lib/x86_64-linux-gnu",
		"-L/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib", "-l:libnccl.so.2"}
	out, err := exec.Command(gcc, args...).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NCCL_NVLS_ENABLE=0")
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 77 {
		skipOrFailNCCL(t, required, "%s", out)
	}
	require.NoError(t, err, "%s", out)
	t.Logf("%s", bytes.TrimSpace(out))
	assert.Contains(t, string(out), "ok: one capture across 2 devices")
}

// TestPeerCaptureProbe builds and runs testdata/peer_capture_probe.c: raw
// C that tries each driver call for a copy between devices under stream
// capture, with peer access and without, on cuMemAlloc and pool memory,
// and replays what it captured. The backend copies between devices with
// cuMemcpyAsync because of what this shows on the 2-GPU machine: it
// captures and replays correctly in every case, cuMemcpyPeerAsync in none.
func TestPeerCaptureProbe(t *testing.T) {
	required := requireTwo()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		skipOrFailNCCL(t, required, "no gcc: %v", err)
	}
	if !fileExists("/usr/local/cuda/include/cuda.h") {
		skipOrFailNCCL(t, required, "no CUDA toolkit headers to build the probe")
	}
	bin := filepath.Join(t.TempDir(), "peer_capture_probe")
	out, err := exec.Command(gcc, "-I/usr/local/cuda/include", "testdata/peer_capture_probe.c", "-o", bin,
		"-L/usr/local/cuda/lib64/stubs", "-lcuda").CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	out, err = exec.Command(bin).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 77 {
		skipOrFailNCCL(t, required, "%s", out)
	}
	require.NoError(t, err, "%s", out)
	t.Logf("%s", bytes.TrimSpace(out))
	for _, c := range []string{"no-peer 1->0 cuMemAlloc", "no-peer 0->1 cuMemAlloc", "peer 1->0 cuMemAlloc", "peer 0->1 cuMemAlloc", "peer 1->0 pool", "peer 0->1 pool"} {
		assert.Contains(t, string(out), c+" cuMemcpyAsync: ok\n")
	}
	assert.NotContains(t, string(out), "WRONG")
}

// gpuRankData is rank r's input: small values, fractions for floats.
func gpuRankData(dt dag.DType, r, n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(dt), uint64(r)))
	b := make([]byte, int64(n)*dt.Size())
	for i := range n {
		v := rng.IntN(17) - 8
		switch dt {
		case dag.U8:
			b[i] = byte(v)
		case dag.I32:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v*1000003)))
		case dag.I64:
			binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)*1e12+int64(i)))
		case dag.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)/3))
		case dag.F64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)/3))
		case dag.F16:
			binary.LittleEndian.PutUint16(b[2*i:], dag.F16FromFloat32(float32(v)/4))
		case dag.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], dag.BF16FromFloat32(float32(v)/4))
		}
	}
	return b
}

// closeEnough compares NCCL's result with the CPU collectives': bit for bit
// for integers; for floats within 2 ulp-ish relative error, since NCCL may
// order the sum differently.
func closeEnough(dt dag.DType, got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes, want %d", len(got), len(want))
	}
	switch dt {
	case dag.F32:
		for i := 0; i < len(got); i += 4 {
			g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[i:])))
			w := float64(math.Float32frombits(binary.LittleEndian.Uint32(want[i:])))
			if math.Abs(g-w) > 1e-6*math.Max(1, math.Abs(w)) {
				return fmt.Errorf("element %d: %g, want %g", i/4, g, w)
			}
		}
	case dag.F64:
		for i := 0; i < len(got); i += 8 {
			g := math.Float64frombits(binary.LittleEndian.Uint64(got[i:]))
			w := math.Float64frombits(binary.LittleEndian.Uint64(want[i:]))
			if math.Abs(g-w) > 1e-14*math.Max(1, math.Abs(w)) {
				return fmt.Errorf("element %d: %g, want %g", i/8, g, w)
			}
		}
	case dag.F16, dag.BF16:
		// NCCL rounds at every hop, the CPU collectives once.
		tol, toF := 2e-3, func(h uint16) float32 { return dag.F16ToFloat32(h) }
		if dt == dag.BF16 {
			tol, toF = 1e-2, dag.BF16ToFloat32
		}
		for i := 0; i < len(got); i += 2 {
			g, w := float64(toF(binary.LittleEndian.Uint16(got[i:]))), float64(toF(binary.LittleEndian.Uint16(want[i:])))
			if math.Abs(g-w) > tol*math.Max(1, math.Abs(w)) {
				return fmt.Errorf("element %d: %g, want %g", i/2, g, w)
			}
		}
	default:
		if !bytes.Equal(got, want) {
			return fmt.Errorf("bytes differ: %x..., want %x...", got[:min(16, len(got))], want[:min(16, len(want))])
		}
	}
	return nil
}

// TestNCCLCollectivesGPU runs every collective, dtype and reduction on 2
// GPUs through the binding and compares with the CPU collectives
// (internal/comm), the oracle.
func TestNCCLCollectivesGPU(t *testing.T) {
	g := openTwoGPUs(t)
	comms := g.comms(t)
	const elems = 4099 // not a multiple of anything NCCL chunks by
	type step struct {
		kind  dag.OpKind
		red   dag.Reduction
		arg   int
		in    int // elements of the input per rank
		out   int // elements of the output per rank
		cpu   func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error
		label string
	}
	var steps []step
	for _, red := range dag.Reductions() {
		steps = append(steps, step{dag.AllReduce, red, 0, elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			copy(out, in)
			return c.AllReduce(ctx, out, dt, red)
		}, "all_reduce " + red.String()})
		steps = append(steps, step{dag.ReduceScatter, red, 0, 2 * elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			return c.ReduceScatter(ctx, in, out, dt, red)
		}, "reduce_scatter " + red.String()})
	}
	steps = append(steps,
		step{dag.AllGather, 0, 0, elems, 2 * elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			return c.AllGather(ctx, in, out)
		}, "all_gather"},
		step{dag.Broadcast, 0, 1, elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			copy(out, in)
			return c.Broadcast(ctx, out, 1)
		}, "broadcast root 1"},
	)
	for _, dt := range []dag.DType{dag.U8, dag.I32, dag.I64, dag.F32, dag.F64} {
		for _, s := range steps {
			t.Run(dt.String()+" "+s.label, func(t *testing.T) {
				es := dt.Size()
				ins := make([]cuDevptr, 2)
				outs := make([]cuDevptr, 2)
				var calls []ncclCall
				for r := range 2 {
					ins[r] = g.alloc(t, r, int64(s.in)*es)
					outs[r] = g.alloc(t, r, int64(s.out)*es)
					require.NoError(t, g.drv.htod(g.ctxs[r], ins[r], gpuRankData(dt, r, s.in)))
					count := int64(s.in)
					if s.kind == dag.ReduceScatter {
						count = int64(s.out)
					}
					calls = append(calls, ncclCall{Kind: s.kind, Send: ins[r], Recv: outs[r], Count: count, DType: dt,
						Reduction: s.red, Arg: s.arg, Comm: comms[r], Stream: g.streams[r]})
				}
				g.sync(t) // the uploads ran on the legacy stream
				require.NoError(t, g.nccl.group(calls))
				g.sync(t)
				for _, c := range comms {
					require.NoError(t, c.asyncError())
				}
				cpu, err := comm.NewLocal(2, comm.Options{Timeout: 30 * time.Second})
				require.NoError(t, err)
				want := make([][]byte, 2)
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for r := range 2 {
					want[r] = make([]byte, int64(s.out)*es)
					wg.Go(func() { errs[r] = s.cpu(t.Context(), cpu[r], gpuRankData(dt, r, s.in), want[r], dt) })
				}
				wg.Wait()
				for r := range 2 {
					require.NoError(t, errs[r])
					got := make([]byte, int64(s.out)*es)
					require.NoError(t, g.drv.dtoh(g.ctxs[r], got, outs[r]))
					assert.NoError(t, closeEnough(dt, got, want[r]), "rank %d", r)
				}
			})
		}
	}
}

// TestNCCLSendRecvGPU swaps two views between the ranks with a grouped
// send/recv pair on each.
func TestNCCLSendRecvGPU(t *testing.T) {
	g := openTwoGPUs(t)
	comms := g.comms(t)
	const n = 1 << 16
	var calls []ncclCall
	recv := make([]cuDevptr, 2)
	for r := range 2 {
		send := g.alloc(t, r, 4*n)
		recv[r] = g.alloc(t, r, 4*n)
		require.NoError(t, g.drv.htod(g.ctxs[r], send, gpuRankData(dag.I32, r, n)))
		calls = append(calls,
			ncclCall{Kind: dag.Send, Send: send, Count: n, DType: dag.I32, Arg: 1 - r, Comm: comms[r], Stream: g.streams[r]},
			ncclCall{Kind: dag.Recv, Recv: recv[r], Count: n, DType: dag.I32, Arg: 1 - r, Comm: comms[r], Stream: g.streams[r]})
	}
	g.sync(t)
	require.NoError(t, g.nccl.group(calls))
	g.sync(t)
	for r := range 2 {
		got := make([]byte, 4*n)
		require.NoError(t, g.drv.dtoh(g.ctxs[r], got, recv[r]))
		assert.Equal(t, gpuRankData(dag.I32, 1-r, n), got, "rank %d", r)
	}
}

// TestNCCLBadCall: a call NCCL refuses is an error naming the call, and
// one the binding refuses never reaches NCCL.
func TestNCCLBadCall(t *testing.T) {
	g := openTwoGPUs(t)
	comms, err := g.nccl.initAll([]int{0, 1})
	require.NoError(t, err)
	defer func() { // abort, not destroy: a communicator that saw an error must not wait for its peers
		for _, c := range comms {
			c.abort()
		}
	}()
	err = g.nccl.group([]ncclCall{{Kind: dag.Copy, Comm: comms[0]}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "copy is not an NCCL call")
	err = g.nccl.group([]ncclCall{{Kind: dag.Broadcast, DType: dag.F32, Count: 4, Arg: 7, Comm: comms[0], Stream: g.streams[0]}})
	require.Error(t, err)
	var ne *NCCLError
	require.ErrorAs(t, err, &ne)
	assert.Contains(t, []string{"ncclBroadcast", "ncclGroupEnd"}, ne.Call, "NCCL reports bad arguments at the call or at the group's end")
}

// TestPeerAccessGPU enables peer access between the 2 devices and the
// pools' access, and checks a peer copy.
func TestPeerAccessGPU(t *testing.T) {
	g := openTwoGPUs(t)
	m, err := g.drv.enablePeerAccess(g.devs, g.ctxs)
	require.NoError(t, err)
	for i := range 2 {
		can, err := g.drv.canAccessPeer(g.devs[i], g.devs[1-i])
		require.NoError(t, err)
		assert.Equal(t, can, m[i][1-i], "device %d to %d", i, 1-i)
		assert.False(t, m[i][i])
	}
	t.Logf("peer access: 0->1 %v, 1->0 %v", m[0][1], m[1][0])
	// Enabling again is no error.
	_, err = g.drv.enablePeerAccess(g.devs, g.ctxs)
	require.NoError(t, err)
	for d := range 2 {
		pool, err := g.drv.pools.setup(g.ctxs[d], g.devs[d])
		require.NoError(t, err)
		require.NoError(t, g.drv.pools.peerAccess(g.ctxs[d], pool, d, g.devs, m))
	}
	const n = 1 << 20
	src := g.alloc(t, 1, n)
	dst := g.alloc(t, 0, n)
	data := gpuRankData(dag.U8, 5, n)
	require.NoError(t, g.drv.htod(g.ctxs[1], src, data))
	g.sync(t)
	require.NoError(t, g.drv.raw.peerCopy(g.ctxs[0], dst, src, n, g.streams[0]))
	require.NoError(t, g.drv.streams.sync(g.ctxs[0], g.streams[0]))
	got := make([]byte, n)
	require.NoError(t, g.drv.dtoh(g.ctxs[0], got, dst))
	assert.Equal(t, data, got)
}

// BenchmarkNCCLAllReduce: f32 all-reduce across 2 GPUs through the binding
// (one cgo call per grouped collective) against a raw C loop calling
// ncclAllReduce, in the same run. busGB/s is NCCL's bus bandwidth,
// 2(n-1)/n x bytes / time.
func BenchmarkNCCLAllReduce(b *testing.B) {
	g := openTwoGPUs(b)
	comms := g.comms(b)
	for _, size := range []struct {
		name  string
		bytes int64
	}{{"4KiB", 4 << 10}, {"256MiB", 256 << 20}} {
		var calls []ncclCall
		for r := range 2 {
			p := g.alloc(b, r, size.bytes)
			calls = append(calls, ncclCall{Kind: dag.AllReduce, Send: p, Recv: p, Count: size.bytes / 4, DType: dag.F32,
				Reduction: dag.Sum, Comm: comms[r], Stream: g.streams[r]})
		}
		require.NoError(b, g.nccl.group(calls)) // warm-up: NCCL connects lazily
		g.sync(b)
		report := func(b *testing.B, start time.Time) {
			el := time.Since(start).Seconds()
			b.ReportMetric(el*1e6/float64(b.N), "us/call")
			b.ReportMetric(float64(size.bytes)*float64(b.N)/el/1e9, "busGB/s") // 2(n-1)/n = 1 for n = 2
		}
		b.Run(size.name+"/binding", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for range b.N {
				if err := g.nccl.group(calls); err != nil {
					b.Fatal(err)
				}
			}
			g.sync(b)
			report(b, start)
		})
		b.Run(size.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			require.NoError(b, g.nccl.rawAllReduce(calls, b.N))
			g.sync(b)
			report(b, start)
		})
	}
}

// BenchmarkPeerCopy: 256 MiB from device 1 to device 0 with peer access
// enabled by enablePeerAccess, one binding call per copy against a raw C
// loop of cuMemcpyPeerAsync, in the same run.
func BenchmarkPeerCopy(b *testing.B) {
	g := openTwoGPUs(b)
	m, err := g.drv.enablePeerAccess(g.devs, g.ctxs)
	require.NoError(b, err)
	if !m[0][1] || !m[1][0] {
		b.Logf("no peer access between the devices: copies go through the host")
	}
	const n = 256 << 20
	src := g.alloc(b, 1, n)
	dst := g.alloc(b, 0, n)
	require.NoError(b, g.drv.raw.peerCopies(g.ctxs[0], dst, g.ctxs[0], src, g.ctxs[1], n, g.streams[0], 2)) // warm-up
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
	}
	b.Run("256MiB/binding", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		for range b.N {
			if err := g.drv.raw.peerCopy(g.ctxs[0], dst, src, n, g.streams[0]); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, g.drv.streams.sync(g.ctxs[0], g.streams[0]))
		report(b, start)
	})
	b.Run("256MiB/raw", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		require.NoError(b, g.drv.raw.peerCopies(g.ctxs[0], dst, g.ctxs[0], src, g.ctxs[1], n, g.streams[0], b.N))
		report(b, start)
	})
}

// TestNCCLInitRankGPU takes the path of ranks in separate processes, with
// goroutines for processes: rank 0 makes the unique id, the TCP rendezvous
// of internal/comm carries it, each rank joins on its own device (with
// ncclCommInitRankConfig and a bound on its CTAs, the path NCCLResources
// takes; sessions' tests take ncclCommInitRank) and runs an ungrouped
// all-reduce; then both abort cleanly.
func TestNCCLInitRankGPU(t *testing.T) {
	g := openTwoGPUs(t)
	id, err := g.nccl.uniqueID()
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	const n = 1 << 16
	got := make([][]byte, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			errs[r] = func() error {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cfg := comm.Config{Place: comm.Place{Rank: r, World: 2, Addr: ln.Addr().String()}, Options: comm.Options{Timeout: 30 * time.Second}}
				if r == 0 {
					cfg.Listener, cfg.Payload = ln, id[:]
				}
				c, err := comm.Rendezvous(t.Context(), cfg)
				if err != nil {
					return err
				}
				defer c.Close()
				var rid NCCLUniqueID
				if copy(rid[:], c.Payload()) != len(rid) {
					return fmt.Errorf("rank %d: unique id of %d bytes", r, len(c.Payload()))
				}
				nc, err := g.nccl.initRank(g.drv, g.ctxs[r], 2, r, rid, NCCLResources{MinCTAs: 1, MaxCTAs: 4})
				if err != nil {
					return err
				}
				defer nc.destroy()
				buf, err := g.drv.memAlloc(g.ctxs[r], 4*n)
				if err != nil {
					return err
				}
				defer g.drv.memFree(g.ctxs[r], buf)
				if err := g.drv.htod(g.ctxs[r], buf, gpuRankData(dag.F32, r, n)); err != nil {
					return err
				}
				if err := g.drv.ctxSync(g.ctxs[r]); err != nil {
					return err
				}
				if err := g.nccl.group([]ncclCall{{Kind: dag.AllReduce, Send: buf, Recv: buf, Count: n, DType: dag.F32,
					Reduction: dag.Sum, Comm: nc, Stream: g.streams[r]}}); err != nil {
					return err
				}
				if err := g.drv.streams.sync(g.ctxs[r], g.streams[r]); err != nil {
					return err
				}
				if err := nc.asyncError(); err != nil {
					return err
				}
				got[r] = make([]byte, 4*n)
				return g.drv.dtoh(g.ctxs[r], got[r], buf)
			}()
		})
	}
	wg.Wait()
	for r := range 2 {
		require.NoError(t, errs[r], "rank %d", r)
	}
	want := make([]byte, 4*n)
	require.NoError(t, comm.Reduce(dag.F32, dag.Sum, want, [][]byte{gpuRankData(dag.F32, 0, n), gpuRankData(dag.F32, 1, n)}))
	for r := range 2 {
		assert.NoError(t, closeEnough(dag.F32, got[r], want), "rank %d", r)
	}

	// A communicator aborted (what a rank does when another failed) is gone
	// without waiting for its peers.
	comms, err := g.nccl.initAll([]int{0, 1})
	require.NoError(t, err)
	for _, c := range comms {
		assert.NoError(t, c.abort())
		assert.NoError(t, c.abort(), "aborting twice is no error")
	}
}
