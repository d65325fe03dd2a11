package planner_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// FuzzSplit declares random sequences of uploads, GEMMs (with and without
// a residual, and of one another's outputs), relus, axpys, partial
// writes, all_reduces asking for 1 to 4 row blocks and downloads over
// buffers of 512 rows, transfers priced so that splitting pays, then checks that the
// plans with and without the split pass pass the verifier (the split one
// against the graph as declared too) and that the cpu backend computes
// the same bytes from both.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 4, 0})
	f.Add([]byte{0, 1, 1, 1, 2, 1, 1, 5, 4, 1, 0, 0, 1, 0, 4, 0})
	f.Add([]byte{0, 0, 3, 0, 1, 0, 5, 0, 4, 1})
	f.Add([]byte{0, 0, 1, 0, 6, 0, 4, 0, 4, 1})
	f.Add([]byte{0, 0, 1, 0, 9, 0, 7, 3, 8, 2, 4, 1})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 48 {
			prog = prog[:48]
		}
		const m, n, k = 512, 8, 8
		b := dag.New()
		dev := dag.OnDevice(0)
		in := b.Array("in", dag.F32, m*k, dag.PinnedHost(), dag.Random(1))
		out := b.Array("out", dag.F32, m*n, dag.PinnedHost(), dag.Zeros())
		w := b.Array("w", dag.F32, k*n, dev, dag.Random(2))
		var x, h [2]*dag.Buffer
		for i := range 2 {
			x[i] = b.Array(string(rune('x'+i)), dag.F32, m*k, dev, dag.Zeros())
			h[i] = b.Array(string(rune('h'+i)), dag.F32, m*n, dev, dag.Zeros())
		}
		xfer := dag.Cost(time.Millisecond)
		shape := dag.GemmShape{M: m, N: n, K: k}
		for i := 0; i+1 < len(prog); i += 2 {
			op, arg := prog[i], prog[i+1]
			p, q := int(arg)%2, int(arg>>1)%2
			switch op % 10 {
			case 0:
				b.Copy(x[p].All(), in.All(), xfer)
			case 1:
				b.Gemm(h[q].All(), x[p].All(), w.All(), shape, dag.Alpha(0.125))
			case 2:
				b.Launch(dag.Relu, dag.Grid1(4), dag.Grid1(256), h[q], h[q])
			case 3:
				b.Gemm(h[q].All(), x[p].All(), w.All(), shape, dag.Beta(1), dag.Output(h[1-q].All()))
			case 4:
				b.Copy(out.All(), h[q].All(), xfer)
			case 5:
				b.Fill(h[q].Slice(4*n*int64(arg), 4*n), 1) // one row
			case 6:
				b.Copy(x[p].All(), x[1-p].All(), xfer)
			case 7:
				b.AllReduce(h[q].All(), dag.Sum, dag.SplitInto(1+int(arg)%4))
			case 8:
				b.Launch(dag.Axpy, dag.Grid1(4), dag.Threads(256), h[q], x[p], float32(1))
			case 9:
				b.Gemm(h[1-q].All(), h[q].All(), w.All(), shape) // k = n: h's rows are a GEMM's A
			}
		}
		g, err := b.Build()
		if err != nil {
			t.Skip(err) // a read of what nothing wrote, say
		}
		results := make([]executor.Results, 2)
		for i, split := range []planner.Splitting{planner.SplitAuto, planner.SplitNone} {
			p, err := planner.New(g, planner.Split(split), planner.Verify(), planner.Streams(1+len(prog)%3))
			require.NoError(t, err)
			results[i], err = executor.Execute(context.Background(), cpu.New(), p)
			require.NoError(t, err)
		}
		for buf, want := range results[1] {
			require.True(t, bytes.Equal(want, results[0][buf]), "buffer %s differs split", buf.Name)
		}
	})
}
