package planner

import (
	"time"

	"github.com/dagrun/dagrun/dag"
)

// CostModel estimates how long an op runs. The planner uses it to place ops
// on streams and to estimate a plan's makespan and critical path.
type CostModel interface {
	Duration(op *dag.Op) time.Duration
}

// Figures of the default cost model: the rough shape of a current data-centre
// GPU (H100 class). Only their ratios matter for planning.
const (
	launchLatency     = 4 * time.Microsecond // a kernel launch or fill, submission to start
	copyLatency       = 8 * time.Microsecond // a copy engine transfer, submission to start
	memOpLatency      = 1 * time.Microsecond // a stream-ordered alloc or free
	hostStepDefault   = 20 * time.Microsecond
	deviceBandwidth   = 1.5e12 // bytes per second, device memory
	pinnedBandwidth   = 25e9   // host <-> device, page-locked host memory (PCIe 5 x16 in practice)
	pageableBandwidth = 7e9    // host <-> device through a staging buffer
	hostBandwidth     = 10e9   // host memory to host memory
)

// DefaultCost returns the cost model the planner uses when Options.Cost is
// nil. An op's own Cost, when set, always wins; otherwise a spin kernel takes
// the microseconds it is told to, other kernels and fills a launch latency
// plus their bytes over device bandwidth, copies a latency plus their bytes
// over the bandwidth of their direction, allocs and frees about a
// microsecond, and host steps a fixed default.
func DefaultCost() CostModel { return defaultCost{} }

type defaultCost struct{}

func (defaultCost) Duration(op *dag.Op) time.Duration {
	if op.Cost > 0 {
		return op.Cost
	}
	switch op.Kind {
	case dag.Launch:
		if l := op.Launch; l != nil && l.Kernel == dag.Spin && len(l.Args) == 1 {
			return launchLatency + time.Duration(l.Args[0].Float*float64(time.Microsecond))
		}
		return launchLatency + overBandwidth(op.Bytes(), deviceBandwidth)
	case dag.Fill:
		return launchLatency + overBandwidth(op.Bytes(), deviceBandwidth)
	case dag.Copy:
		if len(op.Access) != 2 {
			return copyLatency
		}
		return copyLatency + overBandwidth(op.Bytes(), copyBandwidth(op.Access[0].Buf, op.Access[1].Buf))
	case dag.Alloc, dag.Free:
		return memOpLatency
	case dag.Gemm:
		return launchLatency + dag.GemmDuration(op)
	}
	return hostStepDefault
}

// copyBandwidth is the rate of a copy from src to dst.
func copyBandwidth(src, dst *dag.Buffer) float64 {
	srcDev, dstDev := src.Placement == dag.Device, dst.Placement == dag.Device
	switch {
	case srcDev && dstDev:
		return deviceBandwidth
	case !srcDev && !dstDev:
		return hostBandwidth
	}
	host := src
	if srcDev {
		host = dst
	}
	if host.Placement == dag.Pinned {
		return pinnedBandwidth
	}
	return pageableBandwidth
}

func overBandwidth(bytes int64, perSecond float64) time.Duration {
	return time.Duration(float64(bytes) / perSecond * float64(time.Second))
}

// Measured returns a cost model that takes each op's duration from
// durations, by op name (for example from the trace of an earlier run), and
// asks fallback (DefaultCost when nil) about ops it does not list.
func Measured(durations map[string]time.Duration, fallback CostModel) CostModel {
	if fallback == nil {
		fallback = DefaultCost()
	}
	return measuredCost{durations: durations, fallback: fallback}
}

type measuredCost struct {
	durations map[string]time.Duration
	fallback  CostModel
}

func (m measuredCost) Duration(op *dag.Op) time.Duration {
	if d, ok := m.durations[op.Name]; ok {
		return d
	}
	return m.fallback.Duration(op)
}
