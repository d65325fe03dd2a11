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
		t, flops, bytes := cpuOp(op)
		secs += t
		e.Flops += flops
		e.Bytes += bytes
	}
	e.Time = seconds(secs)
	return e
}

// CPUOpTimes is EstimateCPU's time of each of g's ops, by op ID: a long
// run's progress is weighed by them, so that its estimate of the time left
// does not take a thousand small ops for most of the work when one GEMM is.
func CPUOpTimes(g *dag.Graph) []time.Duration {
	times := make([]time.Duration, len(g.Ops))
	for i, op := range g.Ops {
		t, _, _ := cpuOp(op)
		times[i] = seconds(t)
	}
	return times
}

// cpuOp is the model's time of op in seconds, and the FLOPs or the bytes
// the time is of.
func cpuOp(op *dag.Op) (secs, flops, bytes float64) {
	switch {
	case op.Kind.Info().Lifetime != dag.NoLifetime:
		return 0, 0, 0
	case op.Gemm != nil:
		f := op.Gemm.Flops()
		return f / cpuGemmFlops, f, 0
	case op.Kind == dag.Copy:
		b := float64(op.Bytes())
		return b / cpuCopyBandwidth, 0, b
	default:
		b := float64(op.Bytes())
		return b / cpuBandwidth, 0, b
	}
}

func seconds(s float64) time.Duration { return time.Duration(min(s, float64(1<<62)/1e9) * 1e9) }

// Add is the estimate of both e and o, run one after the other.
func (e CPUEstimate) Add(o CPUEstimate) CPUEstimate {
	return CPUEstimate{Time: e.Time + o.Time, Flops: e.Flops + o.Flops, Bytes: e.Bytes + o.Bytes}
}
