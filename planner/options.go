package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/plan"
)

// Options are the settings New plans under, as its Option values set
// them; the passes read them from State.Options.
type Options struct {
	// Streams is the most compute streams per device and per priority
	// (0 means 4; 1..MaxStreams). It is not a total: see the Streams
	// option.
	Streams           int
	SharedCopyStreams bool           // false (default): separate copy streams per direction (h2d, d2h, d2d)
	Cost              perf.CostModel // nil means DefaultCost()
	Strategy          Strategy       // how ops are ordered for placement; the zero value is ListScheduling
	Mode              Mode           // what the estimate is for: an eager run (the zero value) or a graph replay
	Topology          Topology       // which devices copy directly; nil: unknown (Topology)
	SMs               int            // multiprocessors per device, to tell which kernels fill it (perf.Fills); 0 means DefaultSMs
	// MemoryBudget bounds, by memory (a device ordinal, PinnedMemory or
	// PageableMemory), the bytes the plan may need there: its persistent
	// buffers and its temporaries' arena (MemoryUse.Bytes). New orders
	// temporaries to meet it, or fails with a *BudgetError (withBudget).
	// Memories it does not name are unbounded.
	MemoryBudget map[int]int64
	// PoolTemporaries says temporaries come from a stream-ordered pool at
	// run time (cuda's --temporaries pool), which counts an allocation
	// from its submission to its free's: each alloc is then placed just
	// before its first use and each free goes as soon as it can, so that
	// what the steps hold in submission order (MemoryUse.SubmittedPeak)
	// stays near the planned peak. With arenas the order costs nothing
	// and the default placement stands.
	PoolTemporaries bool
	// Objective is what the plan is optimised for; the zero value is
	// Makespan. Bodies of loops and branches are planned under it too.
	Objective Objective
	// Fuse says whether the fuse pass makes a gemm and the bias_add,
	// gelu and relu launches that finish its output one op with an
	// epilogue; the zero value, FuseAuto, does.
	Fuse Fusion
	// Split says whether the split pass cuts the first GEMM and its
	// upload, the last GEMM and its download, and an all_reduce with the
	// GEMMs that compute its rows, into row blocks that overlap; the zero
	// value, SplitAuto, does where it pays or the graph asks.
	Split Splitting
	// CollectiveSMs is how many SMs a collective's kernels hold while
	// they run (NCCL's CTAs, as cuda.NCCLResources bounds them). The
	// GEMMs the split pass runs beside a collective leave that many free
	// (dag.GemmSpec.LeaveSMs), and its cost model weighs them; 0 (the
	// default) leaves none, and then cuts an all_reduce only where the
	// graph asks (dag.SplitInto).
	CollectiveSMs int
	// Early says whether the early pass marks kernels that launch while
	// the kernel before them on their stream still runs (Plan.Early); the
	// zero value, EarlyAuto, does where it pays.
	Early EarlyLaunching
	// Gather says whether the gather pass moves waits up their stream to
	// join earlier ones; the zero value, GatherAuto, does where the cost
	// model has their events reached by then.
	Gather Gathering
	// Rewrites are passes of ScopeRewrite that change the graph before it
	// is placed (fusing, splitting), run in order after fuse; none by
	// default.
	Rewrites []Pass
	// Verify runs the verify pass last: New then fails with the
	// *VerifyError when its plan does not pass Verify.
	Verify bool
}

// An Option sets one of the settings New plans under.
type Option func(*Options)

// Streams bounds the compute streams of each device and priority to n (4
// by default; 1 to MaxStreams). It is not a total: copies get their own
// streams on top (one per direction unless SharedCopyStreams), as do
// collectives, so a plan with two priorities and uploads and downloads
// can hold 2n + 2 streams.
func Streams(n int) Option { return func(o *Options) { o.Streams = n } }

// SharedCopyStreams puts the copies of every direction (host to device,
// device to host, device to device) on shared copy streams, instead of a
// stream per direction.
func SharedCopyStreams() Option { return func(o *Options) { o.SharedCopyStreams = true } }

// Cost prices ops with m instead of perf.DefaultCost(): measured
// durations from a perf model, say.
func Cost(m perf.CostModel) Option { return func(o *Options) { o.Cost = m } }

// OrderBy orders the ops for placement by s (ListScheduling by default).
func OrderBy(s Strategy) Option { return func(o *Options) { o.Strategy = s } }

// ForMode says what the plan's estimate is for: an eager run (Eager, the
// default) or a graph replay (Replay).
func ForMode(m Mode) Option { return func(o *Options) { o.Mode = m } }

// OnTopology says which devices copy to each other directly; without it
// every copy between devices is planned through the host.
func OnTopology(t Topology) Option { return func(o *Options) { o.Topology = t } }

// SMs gives the multiprocessors per device, which tell which kernels fill
// it (perf.Fills); perf.DefaultSMs by default.
func SMs(n int) Option { return func(o *Options) { o.SMs = n } }

// MemoryBudget bounds the bytes the plan may need in memory mem (a device
// ordinal, PinnedMemory or PageableMemory): its persistent buffers and its
// temporaries' arena. New orders temporaries to meet it, or fails with a
// *BudgetError. Give it once per memory; memories without one are
// unbounded.
func MemoryBudget(mem int, bytes int64) Option {
	return func(o *Options) {
		if o.MemoryBudget == nil {
			o.MemoryBudget = map[int]int64{}
		}
		o.MemoryBudget[mem] = bytes
	}
}

// PoolTemporaries plans for temporaries that come from a stream-ordered
// pool at run time (cuda's --temporaries pool): see
// Options.PoolTemporaries.
func PoolTemporaries() Option { return func(o *Options) { o.PoolTemporaries = true } }

// Optimize makes New optimise the plan for objective (Makespan by
// default), the bodies of loops and branches included.
func Optimize(objective Objective) Option { return func(o *Options) { o.Objective = objective } }

// Rewrite adds passes of ScopeRewrite, which change the graph before it is
// placed (fusing, splitting); they run in the order given.
func Rewrite(passes ...Pass) Option {
	return func(o *Options) { o.Rewrites = append(o.Rewrites, passes...) }
}

// Fuse sets whether the fuse pass makes a gemm and the bias_add, gelu
// and relu launches that finish its output one gemm with an epilogue:
// FuseAuto (the default) does, FuseNone places the ops as declared.
func Fuse(f Fusion) Option { return func(o *Options) { o.Fuse = f } }

// Split sets whether the split pass cuts a pipeline's exposed ends into
// row blocks: SplitAuto (the default) does where the cost model says it
// pays, SplitNone leaves every op whole.
func Split(s Splitting) Option { return func(o *Options) { o.Split = s } }

// CollectiveSMs says a collective's kernels hold n SMs while they run:
// the GEMMs the split pass runs beside one leave them free (see
// Options.CollectiveSMs).
func CollectiveSMs(n int) Option { return func(o *Options) { o.CollectiveSMs = n } }

// Verify runs the verify pass last: New then fails with the *VerifyError
// when its plan does not pass Verify.
func Verify() Option { return func(o *Options) { o.Verify = true } }

// optionsOf are the settings opts make.
func optionsOf(opts []Option) Options {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// MaxStreams is the most compute streams per device and priority a plan
// may use: the one limit that specs and the CLI check against.
const MaxStreams = 32

const defaultStreams = 4

// maxSMs bounds Options.SMs far above any GPU's multiprocessor count.
const maxSMs = 1 << 16

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Streams == 0 {
		o.Streams = defaultStreams
	}
	if o.Streams < 1 || o.Streams > MaxStreams {
		return o, &dag.Error{Field: "streams", Msg: fmt.Sprintf("stream budget %d is out of range", o.Streams),
			Hint: fmt.Sprintf("use 1 to %d compute streams per device and priority", MaxStreams)}
	}
	if o.Strategy > plan.Best {
		return o, &dag.Error{Field: "strategy", Msg: fmt.Sprintf("unknown placement strategy %d", o.Strategy),
			Hint: "use planner.ListScheduling, DeclarationOrder or Best"}
	}
	if o.Mode > plan.Replay {
		return o, &dag.Error{Field: "mode", Msg: fmt.Sprintf("unknown run mode %d", o.Mode),
			Hint: "use planner.Eager or planner.Replay"}
	}
	if o.Objective >= numObjectives {
		return o, &dag.Error{Field: "objective", Msg: fmt.Sprintf("unknown objective %d", o.Objective),
			Hint: "use planner.Makespan, LeastMemory or FewestStreams"}
	}
	if o.Fuse >= numFusions {
		return o, &dag.Error{Field: "fuse", Msg: fmt.Sprintf("unknown fusion %d", o.Fuse),
			Hint: "use planner.FuseAuto or FuseNone"}
	}
	if o.Split >= numSplittings {
		return o, &dag.Error{Field: "split", Msg: fmt.Sprintf("unknown splitting %d", o.Split),
			Hint: "use planner.SplitAuto or SplitNone"}
	}
	if o.Early >= numEarlyLaunchings {
		return o, &dag.Error{Field: "early", Msg: fmt.Sprintf("unknown early launching %d", o.Early),
			Hint: "use planner.EarlyAuto or EarlyNone"}
	}
	if o.Gather >= numGatherings {
		return o, &dag.Error{Field: "gather", Msg: fmt.Sprintf("unknown gathering %d", o.Gather),
			Hint: "use planner.GatherAuto or GatherNone"}
	}
	if err := checkRewrites(o.Rewrites); err != nil {
		return o, err
	}
	if o.SMs == 0 {
		o.SMs = perf.DefaultSMs
	}
	if o.SMs < 1 || o.SMs > maxSMs {
		return o, &dag.Error{Field: "sms", Msg: fmt.Sprintf("multiprocessor count %d is out of range", o.SMs),
			Hint: fmt.Sprintf("give the device's count, 1 to %d, or 0 for %d", maxSMs, perf.DefaultSMs)}
	}
	if o.CollectiveSMs < 0 || o.CollectiveSMs >= o.SMs {
		return o, &dag.Error{Field: "collective sms", Msg: fmt.Sprintf("%d SMs for collectives of a device of %d", o.CollectiveSMs, o.SMs),
			Hint: "give fewer than the device has, or 0 to leave the GEMMs every SM"}
	}
	for m, n := range o.MemoryBudget {
		if n <= 0 || m < plan.PageableMemory {
			return o, &dag.Error{Field: "memory budget", Msg: fmt.Sprintf("memory budget of %d bytes for memory %d", n, m),
				Hint: "give each memory (a device ordinal, PinnedMemory or PageableMemory) a budget of at least 1 byte"}
		}
	}
	if o.Cost == nil {
		o.Cost = perf.DefaultCost()
	}
	return o, nil
}
