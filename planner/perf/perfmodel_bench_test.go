package perf_test

import (
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
)

// BenchmarkPerfModelDuration: costing one op from a perf model, measured
// (a kernel with CUDA C source, a copy by its fitted bandwidth) or not (the
// fallback), beside the default model, the floor.
func BenchmarkPerfModelDuration(b *testing.B) {
	g := dag.New()
	x := g.Buffer("x", 1<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	h := g.Buffer("h", 1<<20, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	src := `extern "C" __global__ void k(float* x, float a) { x[threadIdx.x] *= a; }` + string(make([]byte, 4096))
	k := g.Kernel(&dag.Kernel{Name: "k", Source: dag.CUDAC, Code: src,
		Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.ReadWrite}, {Name: "a", Kind: dag.F32Param}}})
	kern := g.Launch(k, dag.Grid1(64), dag.Grid1(256), x, float32(2))
	small := g.Copy(x.Slice(0, 4096), h.Slice(0, 4096))
	large := g.Copy(x.All(), h.All())
	mid := g.Copy(x.Slice(0, 1<<19), h.Slice(0, 1<<19))
	unmeasured := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0)
	if _, err := g.Build(); err != nil {
		b.Fatal(err)
	}
	m := perf.NewPerfModel(perf.DeviceKey{Name: "bench"}, nil)
	if err := m.Update([]perf.OpSample{{Op: kern, Duration: 7 * time.Microsecond},
		{Op: small, Duration: 9 * time.Microsecond}, {Op: large, Duration: 50 * time.Microsecond}}); err != nil {
		b.Fatal(err)
	}
	def := perf.DefaultCost()
	for _, c := range []struct {
		name  string
		model perf.CostModel
		op    *dag.Op
	}{
		{"default/kernel", def, kern},
		{"measured/kernel", m, kern},
		{"fitted/copy", m, mid},
		{"fallback/spin", m, unmeasured},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum time.Duration
			for range b.N {
				sum += c.model.Duration(c.op)
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}
