package planner_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// FuzzFuse declares random sequences of gemms, bias_adds, gelus, relus,
// copies and fills over a few f32 buffers, then checks that the plans
// with and without fusion pass the verifier (the fused one against the
// graph as declared too) and that the cpu backend computes the same
// bytes from both: in f32 a gemm's epilogue is the builtins' arithmetic.
func FuzzFuse(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0})
	f.Add([]byte{0, 1, 1, 1, 3, 1, 5, 1})
	f.Add([]byte{0, 0, 5, 0, 2, 0, 0, 2, 1, 2, 6, 9, 3, 2})
	f.Add([]byte{0, 0x40, 4, 1, 0, 0x81, 2, 0x81, 7, 1, 3, 1})
	f.Add([]byte{0, 2, 1, 2, 2, 2, 0, 0x20, 3, 0, 1, 0, 6, 3, 4, 0x12})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 64 {
			prog = prog[:64]
		}
		b := dag.New()
		x := b.Buffer("x", 4*8*4, dag.Random(1))
		w := b.Buffer("w", 8*16*4, dag.Random(2))
		bias := b.Buffer("bias", 16*4, dag.Value(0.25))
		o := b.Buffer("o", 4*16*4, dag.Zeros())
		var h [3]*dag.Buffer
		for i := range h {
			h[i] = b.Buffer(string(rune('a'+i)), 4*16*4, dag.Zeros())
		}
		one, block := dag.Grid1(1), dag.Grid1(64)
		for i := 0; i+1 < len(prog); i += 2 {
			op, arg := prog[i], prog[i+1]
			k, j := int(arg)%3, int(arg>>2)%3
			var d *dag.Op
			switch op % 8 {
			case 0:
				var opts []dag.OpOption
				switch arg >> 5 & 3 {
				case 1:
					opts = append(opts, dag.WithEpilogue(dag.EpiBias), dag.Bias(bias.All()))
				case 2:
					opts = append(opts, dag.WithEpilogue(dag.EpiRelu))
				}
				d = b.Gemm(h[k].All(), x.All(), w.All(), dag.GemmShape{M: 4, N: 16, K: 8}, opts...)
			case 1:
				bv := bias.All()
				if arg&0x10 != 0 {
					bv = bias.Slice(0, 32) // half a row: not the gemm's bias
				}
				d = b.Launch(dag.BiasAdd, one, block, h[k].All(), bv)
			case 2:
				d = b.Launch(dag.Gelu, one, block, h[k], h[k])
			case 3:
				d = b.Launch(dag.Relu, one, block, h[k], h[k])
			case 4:
				d = b.Launch(dag.Gelu, one, block, h[j], h[k])
			case 5:
				d = b.Copy(o.All(), h[k].All())
			case 6:
				d = b.Fill(bias.All(), float64(arg)/64)
			case 7:
				d = b.Launch(dag.Relu, one, block, h[k].Slice(0, 128), h[k].Slice(0, 128))
			}
			if op&0x80 != 0 {
				d.With(dag.High)
			}
		}
		g, err := b.Build()
		require.NoError(t, err)
		results := make([]executor.Results, 2)
		for i, fuse := range []planner.Fusion{planner.FuseAuto, planner.FuseNone} {
			p, err := planner.New(g, planner.Fuse(fuse), planner.Verify(), planner.Streams(1+len(prog)%3))
			require.NoError(t, err)
			results[i], err = executor.Execute(context.Background(), cpu.New(), p)
			require.NoError(t, err)
		}
		for buf, want := range results[1] {
			require.True(t, bytes.Equal(want, results[0][buf]), "buffer %s differs fused", buf.Name)
		}
	})
}
