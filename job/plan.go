package job

import (
	"fmt"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// Layout is what a caller says about placement, over a spec's run
// settings (the dagrun command's --streams, --strategy, --objective,
// --memory-budget, --temporaries and --fuse).
type Layout struct {
	Streams      int // 0: the spec's run.streams
	Strategy     planner.Strategy
	Objective    planner.Objective
	MemoryBudget int64 // every device's; 0: the spec's run.memory.device
	// Fuse says whether the planner's fuse pass makes a gemm and the
	// launches that finish its output one gemm with an epilogue
	// (planner.Fuse): FuseAuto, the zero value, does.
	Fuse planner.Fusion
	// Split says whether the planner's split pass cuts a pipeline's
	// exposed ends into row blocks (planner.Split): SplitAuto, the zero
	// value, does where it pays.
	Split planner.Splitting
	// PoolTemporaries plans so that the pool holds about the planned peak
	// (planner.PoolTemporaries): temporaries in the pool.
	PoolTemporaries bool
}

// PlanOptions are the planner's options for spec s: its run section, with
// l over it.
func (l Layout) PlanOptions(s *spec.Spec) []planner.Option {
	streams := s.Run.Streams
	if l.Streams != 0 {
		streams = l.Streams
	}
	opts := []planner.Option{planner.Streams(streams), planner.OrderBy(l.Strategy), planner.Optimize(l.Objective), planner.Fuse(l.Fuse), planner.Split(l.Split)}
	if s.Run.SharedCopyStreams {
		opts = append(opts, planner.SharedCopyStreams())
	}
	if s.Run.CollectiveSMs > 0 {
		opts = append(opts, planner.CollectiveSMs(s.Run.CollectiveSMs))
	}
	for mem, bytes := range l.Budget(s) {
		opts = append(opts, planner.MemoryBudget(mem, bytes))
	}
	if l.PoolTemporaries {
		opts = append(opts, planner.PoolTemporaries())
	}
	return opts
}

// Budget is the planner's memory budget for s: l's MemoryBudget (else
// run.memory.device) for every device the graph uses, and run.memory's
// pinned and pageable budgets; nil for none.
func (l Layout) Budget(s *spec.Spec) map[int]int64 {
	m := s.Run.Memory
	device := m.Device
	if l.MemoryBudget != 0 {
		device = l.MemoryBudget
	}
	budget := map[int]int64{}
	if device > 0 && s.Graph != nil {
		for _, b := range s.Graph.Buffers {
			if b != nil && b.Placement == dag.Device {
				budget[b.Device] = device
			}
		}
		for _, op := range s.Graph.Ops {
			if op != nil && op.Device >= 0 {
				budget[op.Device] = device
			}
		}
	}
	if m.Pinned > 0 {
		budget[plan.PinnedMemory] = m.Pinned
	}
	if m.Pageable > 0 {
		budget[plan.PageableMemory] = m.Pageable
	}
	if len(budget) == 0 {
		return nil
	}
	return budget
}

// Plan plans s with opts and the planner's verify pass: a plan that fails
// it (a *verify.Error) is a bug in dagrun, not in the spec.
func Plan(s *spec.Spec, opts ...planner.Option) (*planner.Plan, error) {
	return planner.New(s.Graph, append(slices.Clip(opts), planner.Verify())...)
}

// Mode is the planner's mode for runs that replay a graph (replay) or
// not.
func Mode(replay bool) planner.Mode {
	if replay {
		return planner.Replay
	}
	return planner.Eager
}

// PlanWithModel plans s as Plan does with opts, estimating for mode, with
// what the backend knows of the machine m (copies between devices,
// multiprocessors), costing ops with model's (when not nil); it tells
// model the plan and warns of the model's extrapolations.
func PlanWithModel(s *spec.Spec, opts []planner.Option, model *profile.Learner, mode planner.Mode, m executor.Machine, warn func(string)) (*planner.Plan, error) {
	opts = append(slices.Clip(opts), planner.ForMode(mode))
	opts = append(opts, m.Options()...)
	if model != nil {
		opts = append(opts, planner.Cost(model.Model))
	}
	p, err := Plan(s, opts...)
	if err != nil {
		return nil, err
	}
	if model != nil {
		model.Planned(p)
		for _, w := range model.Model.Extrapolations(s.Graph.Ops) {
			warn(fmt.Sprintf("perf model %s: %s", human.Quote(model.Path), w))
		}
	}
	return p, nil
}

// Program is one program of a job: the spec of an ordinary run, or one
// rank's of a world.
type Program struct {
	Rank   int // its rank in the world; 0 outside one
	Device int // the device its work is on
	Spec   *spec.Spec
	Plan   *planner.Plan
	// Model is the perf model its runs teach and its plan is costed by;
	// nil for none.
	Model *profile.Learner
	// Traced are the runs a world's Run kept op by op.
	Traced []trace.RunSpans
}

// Replan plans the program again for backend b (PlanWithModel, with l's
// options), where its perf model or what b knows of the machine changes
// the plan. Collectives keep their declared order under every plan, so
// ranks still agree.
func (p *Program) Replan(b device.Backend, l Layout, mode planner.Mode, warn func(string)) error {
	m, err := executor.MachineOf(b, p.Spec.Graph)
	if err != nil {
		return err
	}
	// A plan made for the other mode is made again even where the machine
	// is the planner's default (one H100 or H200): a replay's plan may
	// choose fewer streams than an eager run's.
	if p.Model == nil && !m.Known() && p.Plan != nil && p.Plan.Stats.Mode == mode {
		return nil
	}
	p.Plan, err = PlanWithModel(p.Spec, l.PlanOptions(p.Spec), p.Model, mode, m, warn)
	return err
}

// LongOnCPU is the estimated time of a run's work on the CPU backend from
// which CPUWarning warns: a GPU-sized spec would otherwise start without
// a word and run for minutes.
const LongOnCPU = time.Minute

// CPUWarning is a warning that repeat runs of the programs ps are
// estimated to take longer than LongOnCPU on the CPU backend, saying how
// the estimate was made; "" when they are not.
func CPUWarning(ps []*Program, repeat int) string {
	var e profile.CPUEstimate
	for _, p := range ps {
		e = e.Add(profile.EstimateCPU(p.Plan.Graph))
	}
	total := time.Duration(min(float64(e.Time)*float64(max(repeat, 1)), float64(1<<62)))
	if total <= LongOnCPU {
		return ""
	}
	return fmt.Sprintf("this may take about %s on the CPU backend, estimated from %s of GEMMs and %s moved per run (%s); Ctrl-C stops it",
		human.Duration(total.Round(time.Second)), human.Flops(e.Flops), human.Bytes(e.Bytes), e.Rates())
}
