//go:build cgo

package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// gpuBackend returns a Backend, or skips the test when there is no driver
// (fails instead when DAGRUN_REQUIRE_GPU=1). The backend is closed when the
// test ends, and must then hold nothing.
func gpuBackend(t testing.TB, opts ...Option) *Backend {
	t.Helper()
	b, err := New(opts...)
	if err != nil {
		if os.Getenv("DAGRUN_REQUIRE_GPU") == "1" {
			t.Fatalf("DAGRUN_REQUIRE_GPU=1, but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the backend: %v", err)
		}
		if live := b.Live(); live.Total() != 0 {
			t.Errorf("the closed backend holds %+v", live)
		}
	})
	return b
}

// openSession opens a session of g on b; the test closes it.
func openSession(t testing.TB, b *Backend, g *dag.Graph) *Session {
	t.Helper()
	s, err := b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	return s
}

// assertReleased checks that b holds nothing but what a backend keeps
// between sessions (contexts, modules, and the streams and events it keeps
// for the next): every session released what it made.
func assertReleased(t testing.TB, b *Backend, where string) {
	t.Helper()
	live := b.Live()
	assert.Zero(t, b.Sessions(), "sessions open %s", where)
	live.Contexts, live.Modules, live.Kept = 0, 0, 0
	assert.Zero(t, live.Total(), "sessions left %+v %s", live, where)
}

// reference runs g's ops one after another in ID order: the result every
// correct schedule must give.
func reference(t testing.TB, g *dag.Graph) map[*dag.Buffer][]byte {
	mem := map[*dag.Buffer][]byte{}
	for _, b := range g.Buffers {
		if !b.Temporary {
			mem[b] = b.InitialBytes()
		}
	}
	view := func(v dag.View) []byte { return mem[v.Buf][v.Offset:v.End()] }
	for _, op := range g.Ops {
		switch op.Kind {
		case dag.Alloc:
			mem[op.Buffer()] = make([]byte, op.Buffer().Size)
		case dag.Free:
			delete(mem, op.Buffer())
		case dag.Copy:
			copy(view(op.Access[1].View), view(op.Access[0].View))
		case dag.Fill:
			dag.FillElems(view(op.Access[0].View), op.Access[0].Buf.DType, op.FillValue)
		case dag.Memset2D:
			v := view(op.Access[0].View)
			op.Memset2DRows(func(start, end int64) { dag.FillElems(v[start:end], op.Access[0].Buf.DType, op.FillValue) })
		case dag.Host:
			views := make([][]byte, len(op.Access))
			for i, a := range op.Access {
				views[i] = view(a.View)
			}
			require.NoError(t, op.HostFunc(context.Background(), views))
		case dag.Launch:
			refKernel(t, op, view)
		}
	}
	return mem
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func putF32s(b []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// refKernel is each builtin's meaning, each f32 operation rounded on its
// own (explicit conversions forbid fused multiply-adds).
func refKernel(t testing.TB, op *dag.Op, view func(dag.View) []byte) {
	l := op.Launch
	buf := func(i int) []byte { return view(op.Access[l.Args[i].Access].View) }
	switch l.Kernel {
	case dag.Empty, dag.Spin:
	case dag.Iota:
		x := f32s(buf(0))
		for i := range x {
			x[i] = float32(l.Args[1].Float) + float32(i)
		}
		putF32s(buf(0), x)
	case dag.Scale:
		x := f32s(buf(0))
		for i := range x {
			x[i] = float32(x[i] * float32(l.Args[1].Float))
		}
		putF32s(buf(0), x)
	case dag.Axpy:
		y, x := f32s(buf(0)), f32s(buf(1))
		alpha := float32(l.Args[2].Float)
		for i := range y {
			y[i] = y[i] + float32(alpha*x[i])
		}
		putF32s(buf(0), y)
	case dag.Add:
		c, a, b := f32s(buf(0)), f32s(buf(1)), f32s(buf(2))
		for i := range c {
			c[i] = a[i] + b[i]
		}
		putF32s(buf(0), c)
	case dag.ReduceSum:
		var s float64
		for _, v := range f32s(buf(1)) {
			s += float64(v)
		}
		out := f32s(buf(0))
		out[0] = float32(s)
		putF32s(buf(0), out)
	case dag.Matmul:
		c, a, b := f32s(buf(0)), f32s(buf(1)), f32s(buf(2))
		m, n, k := int(l.Args[3].Int), int(l.Args[4].Int), int(l.Args[5].Int)
		for i := range m {
			for j := range n {
				var acc float32
				for p := range k {
					acc = acc + float32(a[i*k+p]*b[p*n+j])
				}
				c[i*n+j] = acc
			}
		}
		putF32s(buf(0), c)
	default:
		t.Fatalf("no reference for kernel %s", l.Kernel.Name)
	}
}

// halfSteps is how many representable values of a 16-bit float lie
// between the bit patterns a and b (sign and magnitude), as ulps does for f32.
func halfSteps(a, b uint16) int64 {
	ord := func(u uint16) int64 {
		if u&(1<<15) != 0 {
			return -int64(u &^ (1 << 15))
		}
		return int64(u)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		return -d
	}
	return d
}

// ulps is how many f32 values lie between a and b.
func ulps(a, b float32) int64 {
	ord := func(f float32) int64 {
		u := int64(math.Float32bits(f))
		if u&(1<<31) != 0 {
			return -(u &^ (1 << 31))
		}
		return u
	}
	d := ord(a) - ord(b)
	if d < 0 {
		return -d
	}
	return d
}

// sameContents compares a run's buffer with the reference: bit for bit,
// except that f32 buffers may differ by maxULP units in the last place,
// and f16 and bf16 ones by maxULP steps of their dtype.
func sameContents(b *dag.Buffer, got, want []byte, maxULP int64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d bytes, want %d", b.Name, len(got), len(want))
	}
	if (b.DType == dag.F16 || b.DType == dag.BF16) && maxULP > 0 {
		// A GEMM's epilogue (fused by the planner) and the cpu's differ in
		// the last f32 bits (accumulation order, tanhf), which the one
		// rounding to the half dtype may carry to a neighbour.
		for i := 0; i+2 <= len(got); i += 2 {
			if d := halfSteps(binary.LittleEndian.Uint16(got[i:]), binary.LittleEndian.Uint16(want[i:])); d > maxULP {
				return fmt.Errorf("%s[%d] = %v, want %v (%d steps of %s apart)", b.Name, i/2, dag.ElemValue(got[i:], b.DType), dag.ElemValue(want[i:], b.DType), d, b.DType)
			}
		}
		return nil
	}
	if b.DType != dag.F32 || maxULP == 0 {
		for i := range got {
			if got[i] != want[i] {
				return fmt.Errorf("%s: byte %d is %#x, want %#x", b.Name, i, got[i], want[i])
			}
		}
		return nil
	}
	g, w := f32s(got), f32s(want)
	for i := range g {
		if ulps(g[i], w[i]) > maxULP {
			return fmt.Errorf("%s[%d] = %v, want %v", b.Name, i, g[i], w[i])
		}
	}
	return nil
}

// runPlan creates p's streams and events on an open session and submits
// p's steps in order, as the executor does, then waits for them.
func runPlan(ctx context.Context, b *Session, p *planner.Plan, fresh bool) error {
	if fresh {
		for _, s := range p.Streams {
			if err := b.NewStream(s.Device, s.Priority); err != nil {
				return err
			}
		}
		for range p.Events {
			if err := b.NewEvent(); err != nil {
				return err
			}
		}
	}
	if err := submit(b, p); err != nil {
		return err
	}
	return b.Sync(ctx)
}

func submit(b *Session, p *planner.Plan) error {
	ops := p.Graph.Ops
	for _, st := range p.Steps {
		var err error
		switch st.Kind {
		case planner.Run:
			err = b.Run(int(st.Stream), ops[st.Op])
		case planner.Record:
			err = b.Record(int(st.Stream), int(st.Event))
		case planner.Wait:
			err = b.Wait(int(st.Stream), int(st.Event))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runGraph plans g, runs it once on b (opened and closed here) and checks
// every persistent buffer against the reference.
func runGraph(t testing.TB, b *Backend, g *dag.Graph, maxULP int64, opts ...planner.Option) {
	t.Helper()
	p, err := planner.New(g, opts...)
	require.NoError(t, err)
	s := openSession(t, b, g)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, runPlan(context.Background(), s, p, true))
	checkResults(t, s, p, maxULP)
}

// checkResults compares every persistent buffer of an open session after a
// run of p with the sequential reference and with the CPU backend's run.
func checkResults(t testing.TB, b *Session, p *planner.Plan, maxULP int64) {
	t.Helper()
	g := p.Graph
	want := reference(t, g)
	onCPU, err := executor.Execute(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	for _, buf := range g.Buffers {
		if buf.Temporary {
			continue
		}
		got, err := b.Read(buf)
		require.NoError(t, err)
		require.NoError(t, sameContents(buf, got, want[buf], maxULP), "against the reference")
		require.NoError(t, sameContents(buf, got, onCPU[buf], maxULP), "against the cpu backend")
	}
}
