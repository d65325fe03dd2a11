//go:build cgo

package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// TestConditionalProbe builds testdata/cond_probe.c against the toolkit and
// runs it: the entry points dagrun loads, its CUgraphNodeParams layout,
// a while and an if/else lowered inside a capture as the backend lowers
// them, and the raw floors of a loop (a WHILE node, the body unrolled, a
// host-driven loop) that BENCHMARKS.md sets dagrun's loops beside.
func TestConditionalProbe(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		requireGPU(t, "no gcc: %v", err)
	}
	if !fileExists("/usr/local/cuda/include/cuda.h") || !fileExists("/usr/local/cuda/include/nvrtc.h") {
		requireGPU(t, "no CUDA toolkit headers to build the probe")
	}
	bin := filepath.Join(t.TempDir(), "cond_probe")
	out, err := exec.Command(gcc, "-I/usr/local/cuda/include", "testdata/cond_probe.c", "-o", bin,
		"-L/usr/local/cuda/lib64", "-lnvrtc", "-L/usr/local/cuda/lib64/stubs", "-lcuda", "-ldl",
		"-Wl,-rpath,/usr/local/cuda/lib64").CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	out, err = exec.Command(bin).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 77 {
		requireGPU(t, "%s", out)
	}
	require.NoError(t, err, "%s", out)
	t.Logf("%s", bytes.TrimSpace(out))
	for _, line := range []string{"layout: ok\n", "capture while: ok", "capture if/else: ok", "K=1 ", "K=9 ", "K=99 "} {
		assert.Contains(t, string(out), line)
	}
	assert.NotContains(t, string(out), "WRONG")
}

// loopKernels are the kernels of the loop tests: halve halves x[0] and
// clears the flag once it is at most t; dec counts n down and clears the
// flag at zero; empty does nothing.
var (
	halveKernel = &dag.Kernel{Name: "halve", Source: dag.CUDAC, Params: []dag.Param{
		{Name: "x", Kind: dag.BufferParam, Mode: dag.ReadWrite}, {Name: "flag", Kind: dag.BufferParam, Mode: dag.Write}, {Name: "t", Kind: dag.F32Param}},
		Code: `extern "C" __global__ void halve(float* x, int* flag, float t) { x[0] *= 0.5f; flag[0] = x[0] > t; }`}
	decKernel = &dag.Kernel{Name: "dec", Source: dag.CUDAC, Params: []dag.Param{
		{Name: "n", Kind: dag.BufferParam, Mode: dag.ReadWrite}, {Name: "flag", Kind: dag.BufferParam, Mode: dag.Write}},
		Code: `extern "C" __global__ void dec(int* n, int* flag) { int v = --n[0]; flag[0] = v > 0; }`}
	emptyKernel = &dag.Kernel{Name: "empty", Source: dag.CUDAC, Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.Read}},
		Code: `extern "C" __global__ void empty(const float* x) {}`}
)

func i32bytes(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func f32bytes(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// loopSession opens g and gives each control op of its top level one body
// stream per body plus the streams extra asks for, with steps made by
// steps(op, body, entry stream).
type loopSession struct {
	*Session
	t *testing.T
}

func (ls loopSession) streams(n int) int {
	first := len(ls.sub.streams)
	for range n {
		require.NoError(ls.t, ls.NewStream(0, dag.Normal))
	}
	return first
}

func (ls loopSession) events(n int) int {
	first := len(ls.sub.events)
	for range n {
		require.NoError(ls.t, ls.NewEvent())
	}
	return first
}

// runBoth runs the top-level ops on stream 0 eagerly, then captured and
// replayed, resetting the buffers with reset before each, and returns
// what read reads after each.
func (ls loopSession) runBoth(ops []*dag.Op, reset func(), read func() []byte) (eager, replay []byte, eagerErr, replayErr error) {
	t := ls.t
	ctx := context.Background()
	reset()
	for _, op := range ops {
		require.NoError(t, ls.Run(0, op))
	}
	eagerErr = ls.Sync(ctx)
	eager = read()
	require.NoError(t, ls.BeginCapture(0))
	for _, op := range ops {
		require.NoError(t, ls.Run(0, op))
	}
	gi, err := ls.EndCapture(0)
	require.NoError(t, err)
	require.NoError(t, ls.Instantiate(gi))
	reset()
	require.NoError(t, ls.LaunchGraph(gi, 0))
	replayErr = ls.Sync(ctx)
	replay = read()
	require.NoError(t, ls.DestroyGraph(gi))
	return
}

func (ls loopSession) read(b *dag.Buffer) []byte {
	data, err := ls.Read(b)
	require.NoError(ls.t, err)
	return data
}

// halvingLoop opens a session of one while named name, max iterations at
// most, whose body halves x[0] and clears the flag once x[0] is at most
// t; the body runs on a stream of its own.
func halvingLoop(t *testing.T, name string, threshold float64, most int64) (ls loopSession, loop *dag.Op, x, flag *dag.Buffer) {
	b := gpuBackend(t)
	g := dag.New()
	x = g.Buffer("x", 4, dag.Zeros())
	flag = g.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	g.Kernel(halveKernel)
	var halve *dag.Op
	loop = g.While(flag.All(), func(body *dag.Builder) {
		halve = body.Launch(halveKernel, dag.Grid1(1), dag.Threads(1), x, flag, threshold, dag.Name("halve"))
	}, dag.Name(name), dag.AtMost(most))
	graph, err := g.Build()
	require.NoError(t, err)
	ls = loopSession{openSession(t, b, graph), t}
	t.Cleanup(func() { ls.Close() })
	ls.streams(1)
	bs := ls.streams(1)
	require.NoError(t, ls.SetBodies(loop, [][]device.Step{{{Kind: device.RunStep, Stream: bs, Op: halve}}}))
	return ls, loop, x, flag
}

// TestWhileGPU: a while halves x until it is at most t, eagerly and
// replayed; the result is what the loop computes on the host.
func TestWhileGPU(t *testing.T) {
	ls, loop, x, flag := halvingLoop(t, "loop", 0.75, 0)
	for _, start := range []float32{1000, 0.5} {
		reset := func() {
			require.NoError(t, ls.Write(x, f32bytes(start)))
			require.NoError(t, ls.Write(flag, i32bytes(1)))
		}
		want := start
		for {
			want *= 0.5
			if want <= 0.75 {
				break
			}
		}
		eager, replay, e1, e2 := ls.runBoth([]*dag.Op{loop}, reset, func() []byte { return ls.read(x) })
		require.NoError(t, e1)
		require.NoError(t, e2)
		assert.Equal(t, f32bytes(want), eager, "eager from %v", start)
		assert.Equal(t, f32bytes(want), replay, "replayed from %v", start)
	}
	// A clear flag runs no iteration at all.
	reset := func() {
		require.NoError(t, ls.Write(x, f32bytes(1000)))
		require.NoError(t, ls.Write(flag, i32bytes(0)))
	}
	eager, replay, e1, e2 := ls.runBoth([]*dag.Op{loop}, reset, func() []byte { return ls.read(x) })
	require.NoError(t, errors.Join(e1, e2))
	assert.Equal(t, f32bytes(1000), eager)
	assert.Equal(t, f32bytes(1000), replay)
}

// TestWhileMaxGPU: a loop whose flag stays set stops at max and fails the
// run naming the loop, eagerly and replayed; the next run is clean.
func TestWhileMaxGPU(t *testing.T) {
	ls, loop, x, flag := halvingLoop(t, "forever", -1, 5)
	reset := func() {
		require.NoError(t, ls.Write(x, f32bytes(64)))
		require.NoError(t, ls.Write(flag, i32bytes(1)))
	}
	eager, replay, e1, e2 := ls.runBoth([]*dag.Op{loop}, reset, func() []byte { return ls.read(x) })
	for _, err := range []error{e1, e2} {
		require.Error(t, err)
		assert.Contains(t, err.Error(), `op "forever"`)
		assert.Contains(t, err.Error(), "its 5 iterations (max)")
	}
	assert.Equal(t, f32bytes(2), eager, "five halvings")
	assert.Equal(t, f32bytes(2), replay, "five halvings")
	require.NoError(t, ls.Write(flag, i32bytes(0)))
	require.NoError(t, ls.Run(0, loop))
	require.NoError(t, ls.Sync(context.Background()), "the mark is cleared once reported")
}

// TestIfElseAndNestingGPU: an if/else inside a while whose body runs on
// two streams (forked and joined by its own steps): each iteration counts
// n down on one stream and, on the other, adds 1 to y when the branch
// flag is set, 10 otherwise.
func TestIfElseAndNestingGPU(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	n := g.Buffer("n", 4, dag.Of(dag.I32), dag.Zeros())
	flag := g.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	pick := g.Buffer("pick", 4, dag.Of(dag.I32), dag.Zeros())
	y := g.Buffer("y", 8, dag.Zeros())
	g.Kernel(decKernel)
	var dec, branch, thenFill, elseFill *dag.Op
	loop := g.While(flag.All(), func(body *dag.Builder) {
		dec = body.Launch(decKernel, dag.Grid1(1), dag.Threads(1), n, flag, dag.Name("dec"))
		branch = body.If(pick.All(), func(then *dag.Builder) {
			thenFill = then.Fill(y.Slice(0, 4), 1, dag.Name("one"))
		}, func(els *dag.Builder) {
			elseFill = els.Fill(y.Slice(4, 4), 10, dag.Name("ten"))
		}, dag.Name("branch"))
	}, dag.Name("loop"))
	graph, err := g.Build()
	require.NoError(t, err)
	ls := loopSession{openSession(t, b, graph), t}
	defer ls.Close()
	ls.streams(1)
	b0 := ls.streams(2)
	b1 := b0 + 1
	br := ls.streams(2) // the branch's bodies: one entry stream each
	ev := ls.events(2)
	require.NoError(t, ls.SetBodies(branch, [][]device.Step{
		{{Kind: device.RunStep, Stream: br, Op: thenFill}},
		{{Kind: device.RunStep, Stream: br + 1, Op: elseFill}},
	}))
	require.NoError(t, ls.SetBodies(loop, [][]device.Step{{
		{Kind: device.RecordStep, Stream: b0, Event: ev},
		{Kind: device.WaitStep, Stream: b1, Event: ev},
		{Kind: device.RunStep, Stream: b0, Op: dec},
		{Kind: device.RunStep, Stream: b1, Op: branch},
		{Kind: device.RecordStep, Stream: b1, Event: ev + 1},
		{Kind: device.WaitStep, Stream: b0, Event: ev + 1},
	}}))
	for _, p := range []int32{1, 0} {
		reset := func() {
			require.NoError(t, ls.Write(n, i32bytes(3)))
			require.NoError(t, ls.Write(flag, i32bytes(1)))
			require.NoError(t, ls.Write(pick, i32bytes(p)))
			require.NoError(t, ls.Write(y, f32bytes(0, 0)))
		}
		want := f32bytes(0, 10)
		if p != 0 {
			want = f32bytes(1, 0)
		}
		eager, replay, e1, e2 := ls.runBoth([]*dag.Op{loop}, reset, func() []byte { return append(ls.read(y), ls.read(n)...) })
		require.NoError(t, errors.Join(e1, e2))
		assert.Equal(t, append(want, i32bytes(0)...), eager, "eager, pick %d", p)
		assert.Equal(t, append(want, i32bytes(0)...), replay, "replayed, pick %d", p)
	}
}

// BenchmarkWhileGPU times one replay of a while of 1000 iterations around
// k empty kernels and a count down, per iteration, beside
// TestConditionalProbe's raw WHILE node around k empty kernels, the count
// down and a kernel that sets the condition (k+2 kernels). k=K: the count
// down (dec) sets the flag and dagrun's condition kernel ends each
// iteration (k+2 kernels). set_flag/k=K: the count down (decf) is
// followed by the set_flag builtin on the loop's flag, whose kernel then
// sets the condition itself (k+2 kernels, as the raw node's).
func BenchmarkWhileGPU(b *testing.B) {
	be := gpuBackend(b)
	for _, setFlag := range []bool{false, true} {
		for _, k := range []int{1, 9, 99} {
			name := "k=" + strconv.Itoa(k)
			if setFlag {
				name = "set_flag/" + name
			}
			b.Run(name, func(b *testing.B) { benchWhile(b, be, k, setFlag) })
		}
	}
}

// decfKernel counts an f32 down by one, for set_flag to read.
var decfKernel = &dag.Kernel{Name: "decf", Source: dag.CUDAC, Params: []dag.Param{{Name: "n", Kind: dag.BufferParam, Mode: dag.ReadWrite}},
	Code: `extern "C" __global__ void decf(float* n) { n[0] -= 1.0f; }`}

// benchWhile is one BenchmarkWhileGPU: the body's ops on one stream, in
// order, as the probe's.
func benchWhile(b *testing.B, be *Backend, k int, setFlag bool) {
	const iters = 1000
	g := dag.New()
	n := g.Buffer("n", 4, dag.Of(dag.I32), dag.Zeros())
	nf := g.Buffer("nf", 4, dag.Zeros())
	flag := g.Buffer("flag", 4, dag.Of(dag.I32), dag.Zeros())
	x := g.Buffer("x", 4, dag.Zeros())
	g.Kernel(emptyKernel)
	g.Kernel(decKernel)
	g.Kernel(decfKernel)
	var body []*dag.Op
	loop := g.While(flag.All(), func(bb *dag.Builder) {
		for i := range k {
			body = append(body, bb.Launch(emptyKernel, dag.Grid1(1), dag.Threads(1), x, dag.Name("empty"+strconv.Itoa(i))))
		}
		if setFlag {
			body = append(body, bb.Launch(decfKernel, dag.Grid1(1), dag.Threads(1), nf, dag.Name("dec")),
				bb.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), flag, nf, 0.5, dag.Name("again")))
		} else {
			body = append(body, bb.Launch(decKernel, dag.Grid1(1), dag.Threads(1), n, flag, dag.Name("dec")))
		}
	})
	graph, err := g.Build()
	require.NoError(b, err)
	se := openSession(b, be, graph)
	defer se.Close()
	require.NoError(b, se.NewStream(0, dag.Normal))
	require.NoError(b, se.NewStream(0, dag.Normal))
	var steps []device.Step
	for _, op := range body {
		steps = append(steps, device.Step{Kind: device.RunStep, Stream: 1, Op: op})
	}
	require.NoError(b, se.SetBodies(loop, [][]device.Step{steps}))
	c := se.ctl.controls[opSlot(loop)]
	require.Equal(b, setFlag, c.setter != nil, "the condition in the body's last kernel")
	require.NoError(b, se.BeginCapture(0))
	require.NoError(b, se.Run(0, loop))
	gi, err := se.EndCapture(0)
	require.NoError(b, err)
	require.NoError(b, se.Instantiate(gi))
	run := func() time.Duration {
		require.NoError(b, se.Write(n, i32bytes(iters)))
		require.NoError(b, se.Write(nf, f32bytes(iters)))
		require.NoError(b, se.Write(flag, i32bytes(1)))
		start := time.Now()
		require.NoError(b, se.LaunchGraph(gi, 0))
		require.NoError(b, se.Sync(context.Background()))
		return time.Since(start)
	}
	run()
	b.ResetTimer()
	var best time.Duration
	for i := 0; i < b.N; i++ {
		if d := run(); best == 0 || d < best {
			best = d
		}
	}
	b.ReportMetric(best.Seconds()*1e6/iters, "us/iter")
	counter, want := n, i32bytes(0)
	if setFlag {
		counter, want = nf, f32bytes(0)
	}
	data, err := se.Read(counter)
	require.NoError(b, err)
	require.Equal(b, want, data)
}
