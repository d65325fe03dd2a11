package dag_test

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// A transformer MLP block: h = gelu(x W1) in bf16 (f32 accumulation),
// then y = h W2 + x, written to y, so the residual x needs no copy.
func ExampleBuilder_Gemm() {
	const t, d, h = 16, 64, 256
	b := dag.New()
	bf16 := dag.Of(dag.BF16)
	x := b.Buffer("x", t*d*2, bf16, dag.Random(1)) // t x d
	w1 := b.Buffer("w1", d*h*2, bf16, dag.Random(2))
	w2 := b.Buffer("w2", h*d*2, bf16, dag.Random(3))
	hid := b.Buffer("h", t*h*2, bf16, dag.Zeros())
	y := b.Buffer("y", t*d*2, bf16, dag.Zeros())
	b.Gemm(hid.All(), x.All(), w1.All(), dag.GemmShape{M: t, N: h, K: d}, dag.Name("up"))
	b.Launch(dag.Gelu, dag.Grid1(16), dag.Grid1(256), hid, hid, dag.Name("gelu"))
	b.Gemm(x.All(), hid.All(), w2.All(), dag.GemmShape{M: t, N: d, K: h}, dag.Beta(1), dag.Output(y.All()), dag.Name("down"))
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range g.Ops {
		fmt.Printf("%s %s after %v\n", op.Name, op.Kind, op.Deps)
	}
	fmt.Println(g.Ops[0].Gemm, g.Ops[1].Launch.Kernel.EntryName(), g.Ops[2].Gemm.LDC)
	// Output:
	// up gemm after []
	// gelu launch after [0]
	// down gemm after [1]
	// 16x256x64 gelu_bf16 64
}
