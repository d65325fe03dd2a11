package profile

import (
	"time"

	"github.com/dagrun/dagrun/dag"
)

// The CPU backend's rates, measured on a 2-core machine shared with other
// work: a 1024^3 GEMM (bf16 or f32) in about 210 ms, two at once (10
// GFLOP/s each); a 256 MiB copy in 40 ms (6.7 GB/s); the scale kernel
// over 256 MiB in 135 ms (2 GB/s of the bytes the op touches, the rate of
// the Go kernels). They are for a warning before a long run, not a plan.
const (
	cpuGemmFlops     = 10e9
	cpuCopyBandwidth = 6.7e9
	cpuBandwidth     = 2e9
)

// CPUEstimate is how long a graph takes on the CPU backend, run op after
// op, by a simple model: GEMMs by their FLOPs, copies by their bytes at
// the rate of memory, everything else by the bytes it touches at the rate
// of the Go kernels.
type CPUEstimate struct {
	Time  time.Duration
	Flops float64 // the GEMMs'
	Bytes float64 // copied or touched by the other ops
}

// Rates says in words what the estimate assumes.
func (CPUEstimate) Rates() string {
	return "GEMMs at 10 GFLOP/s, copies at 6.7 GB/s, other ops at 2 GB/s of the bytes they touch: rates of a 2-core machine"
}

// EstimateCPU estimates g's run on the CPU backend.
func EstimateCPU(g *dag.Graph) CPUEstimate {
	var e CPUEstimate
	var secs float64
	for _, op := range g.Ops {
		switch {
		case op.Kind.Info().Lifetime != dag.NoLifetime:
		case op.Gemm != nil:
			f := op.Gemm.Flops()
			e.Flops += f
			secs += f / cpuGemmFlops
		case op.Kind == dag.Copy:
			b := float64(op.Bytes())
			e.Bytes += b
			secs += b / cpuCopyBandwidth
		default:
			b := float64(op.Bytes())
			e.Bytes += b
			secs += b / cpuBandwidth
		}
	}
	e.Time = time.Duration(min(secs, float64(1<<62)/1e9) * 1e9)
	return e
}

// Add is the estimate of both e and o, run one after the other.
func (e CPUEstimate) Add(o CPUEstimate) CPUEstimate {
	return CPUEstimate{Time: e.Time + o.Time, Flops: e.Flops + o.Flops, Bytes: e.Bytes + o.Bytes}
}
