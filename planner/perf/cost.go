package perf

import (
	"math"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// CostModel estimates how long an op runs on the device. The planner uses
// it to place ops on streams and to estimate a plan's makespan and critical
// path. A model may also implement OverheadModel to give the costs of the
// plan's other steps; otherwise DefaultOverheads apply.
type CostModel interface {
	Duration(op *dag.Op) time.Duration
}

// OverheadModel is a CostModel that also knows what submitting ops, event
// records and waits cost (a perf model measured on the machine, say).
type OverheadModel interface {
	CostModel
	Overheads() Overheads
}

// Overheads are the costs of running a plan beyond its ops' own durations.
// Eager runs pay the host's submission of every step, one after another;
// graph replays pay the graph's launch of every op node.
type Overheads struct {
	Submit time.Duration // eager: host time to submit one op
	// SubmitKinds, when it has a kind, is the host's time to submit an op
	// of that kind eagerly, in place of Submit (a perf model measures it
	// per kind: a GEMM's submission costs more than a copy's). Read only.
	SubmitKinds     map[dag.OpKind]time.Duration
	Record          time.Duration // eager: host time to submit one event record
	Wait            time.Duration // eager: host time to submit one stream wait
	CrossDeviceWait time.Duration // eager: added to Wait when the event is recorded on another device
	ReplayOp        time.Duration // replay: time the graph launch takes per op before the op can start
	// ReplayBranch is how much later each further stream of a device
	// starts its first op in a graph replay than the one before: a graph's
	// concurrent branches are set going one after another, so spreading
	// short ops over many streams can lose more than it overlaps.
	ReplayBranch time.Duration
	// Start and ReplayStart are a run's fixed costs before its first step:
	// the host's setup of an eager run, the launch of a replayed graph. They
	// are learned by perf models (a run's measured makespan less the
	// estimate without them); 0 by default.
	Start       time.Duration // eager
	ReplayStart time.Duration // replay
}

// DefaultOverheads are the costs measured on an H100 (BENCHMARKS.md):
// 3.2 us per op submitted eagerly (workloads A and E through dagrun: 3.17 and
// 3.26 us), 0.42 us per event record and wait pair through dagrun (workload
// D), split evenly, and 0.175 us per op node of a graph replay (workload E
// replayed), and 1.5 us per further stream a replay starts on a device (8
// chains of 1-20 us kernels replayed on 1, 2, 4 and 8 streams of an H200:
// 1.4-1.5 us,
// BenchmarkReplayBranches). Waits on another device's event have not been
// measured yet and are charged as a wait on the same device.
func DefaultOverheads() Overheads {
	return Overheads{
		Submit:          3200 * time.Nanosecond,
		Record:          210 * time.Nanosecond,
		Wait:            210 * time.Nanosecond,
		CrossDeviceWait: 0,
		ReplayOp:        175 * time.Nanosecond,
		ReplayBranch:    1500 * time.Nanosecond,
	}
}

// OverheadsOf returns m's overheads when it is an OverheadModel, else
// DefaultOverheads.
func OverheadsOf(m CostModel) Overheads {
	if o, ok := m.(OverheadModel); ok {
		return o.Overheads()
	}
	return DefaultOverheads()
}

// Figures of the default cost model: device time on a current data-centre GPU
// (H100 class). Host submission is an overhead of its own (DefaultOverheads).
const (
	// A kernel or fill beyond its work: replaying workload C runs 10 us
	// spin kernels at 10.9 us each.
	launchLatency     = 1 * time.Microsecond
	copyLatency       = 8 * time.Microsecond // a copy engine transfer, submission to start
	memOpLatency      = 1 * time.Microsecond // a stream-ordered alloc or free
	hostStepDefault   = 20 * time.Microsecond
	deviceBandwidth   = 1.5e12 // bytes per second, device memory
	pinnedBandwidth   = 54e9   // host <-> device, page-locked host memory (54.6 GB/s on the H100, BASELINES.md)
	pageableBandwidth = 7e9    // host <-> device through a staging buffer
	hostBandwidth     = 10e9   // host memory to host memory
	// A collective: NCCL's small-message latency, and the bus bandwidth of
	// an all-reduce over NVLink (BASELINES.md: 264-297 GB/s on 2 H200s).
	collectiveLatency   = 15 * time.Microsecond
	collectiveBandwidth = 250e9
)

// DefaultCost returns the cost model the planner uses when Options.Cost is
// nil. An op's own Cost, when set, always wins; otherwise each kind's entry
// in the planner's kind table decides: a spin kernel takes the microseconds
// it is told to plus a launch latency, other kernels and fills a launch
// latency plus their bytes over device bandwidth, copies a latency plus
// their bytes over the bandwidth of their direction, allocs and frees about
// a microsecond, and host steps a fixed default.
func DefaultCost() CostModel { return defaultCost{} }

type defaultCost struct{}

func (defaultCost) Duration(op *dag.Op) time.Duration {
	if op.Cost > 0 {
		return op.Cost
	}
	switch f := costOf(op.Kind); {
	case f.body:
		return bodyCost(op)
	case f.cost != nil:
		return f.cost(op)
	}
	return hostStepDefault
}

func (defaultCost) Overheads() Overheads { return DefaultOverheads() }

func launchCost(op *dag.Op) time.Duration {
	if l := op.Launch; l != nil && l.Kernel == dag.Spin && len(l.Args) == 1 {
		return satAddDur(launchLatency, durationOf(l.Args[0].Float*float64(time.Microsecond)))
	}
	return satAddDur(launchLatency, overBandwidth(op.Bytes(), deviceBandwidth))
}

func fillCost(op *dag.Op) time.Duration {
	return satAddDur(launchLatency, overBandwidth(op.Bytes(), deviceBandwidth))
}

func copyCost(op *dag.Op) time.Duration {
	if len(op.Access) != 2 || op.Access[0].Buf == nil || op.Access[1].Buf == nil {
		return copyLatency
	}
	return satAddDur(copyLatency, overBandwidth(op.Bytes(), copyBandwidth(op.Access[0].Buf, op.Access[1].Buf)))
}

func memOpCost(*dag.Op) time.Duration { return memOpLatency }

func gemmCost(op *dag.Op) time.Duration { return satAddDur(launchLatency, dag.GemmDuration(op)) }

// collectiveCost is a latency plus the op's bytes over the bus bandwidth;
// a measured perf model replaces it where it has the collective.
func collectiveCost(op *dag.Op) time.Duration {
	return satAddDur(collectiveLatency, overBandwidth(op.Bytes(), collectiveBandwidth))
}

func hostStepCost(*dag.Op) time.Duration { return hostStepDefault }

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
	return durationOf(float64(bytes) / perSecond * float64(time.Second))
}

// durationOf converts nanoseconds to a Duration, saturating at the ends of
// the range and mapping NaN and negative values to zero.
func durationOf(ns float64) time.Duration {
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Measured returns a cost model that takes each op's duration from
// durations, by op name (for example from the trace of an earlier run), and
// asks fallback (DefaultCost when nil) about ops it does not list and about
// overheads.
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

func (m measuredCost) Overheads() Overheads { return OverheadsOf(m.fallback) }

// Saturating arithmetic on non-negative durations in nanoseconds: costs come
// from specs, perf models and users, and a sum that wrapped would reorder a
// plan.

func satAddDur(a, b time.Duration) time.Duration {
	return time.Duration(dag.AddSat(int64(a), int64(b)))
}

// SatMul returns a*n for a, n >= 0, or math.MaxInt64 when that overflows.
func SatMul(a int64, n int64) int64 {
	if n != 0 && a > math.MaxInt64/n {
		return math.MaxInt64
	}
	return a * n
}

// NonNegative clamps a model's answer to the range the planner sums.
func NonNegative(d time.Duration) int64 { return max(int64(d), 0) }

// WithOverheads returns m (DefaultCost when nil) with its overheads replaced
// by o: for example zero overheads, to plan for the device alone.
func WithOverheads(m CostModel, o Overheads) OverheadModel {
	if m == nil {
		m = DefaultCost()
	}
	return withOverheads{CostModel: m, o: o}
}

type withOverheads struct {
	CostModel
	o Overheads
}

func (w withOverheads) Overheads() Overheads { return w.o }
