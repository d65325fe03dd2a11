package planner

import (
	"fmt"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

// EarlyLaunching says whether New marks kernels to launch early (the early
// pass): CUDA's programmatic dependent launch, where a kernel is launched
// while the kernel before it on its stream still runs and waits for it on
// the device (griddepcontrol.wait) before touching memory.
type EarlyLaunching uint8

const (
	// EarlyAuto (the default) launches a kernel early where both kernels
	// of the edge wait on the device, builtins or small grids (earlyPays).
	EarlyAuto EarlyLaunching = iota
	// EarlyNone launches every kernel after the one before it ends.
	EarlyNone

	numEarlyLaunchings // keep last
)

var earlyNames = [numEarlyLaunchings]string{EarlyAuto: "auto", EarlyNone: "none"}

func (e EarlyLaunching) String() string {
	if e < numEarlyLaunchings {
		return earlyNames[e]
	}
	return fmt.Sprintf("EarlyLaunching(%d)", uint8(e))
}

// Early sets whether the early pass marks kernels to launch early:
// EarlyAuto (the default) does where it pays, EarlyNone never does.
func Early(e EarlyLaunching) Option { return func(o *Options) { o.Early = e } }

// earlyPass marks the launches that go early (Plan.Early). It changes no
// step: a backend without programmatic dependent launch runs the plan as
// it stands, and the one with it launches the marked kernels with the
// attribute, eagerly and under capture (where they become programmatic
// graph edges).
type earlyPass struct{}

func (earlyPass) Name() string { return "early" }
func (earlyPass) Scope() Scope { return ScopeLaunch }

func (earlyPass) Run(s *State) (string, error) {
	p := s.Plan
	p.Early = earlyLaunches(p, s.Options.SMs)
	n := p.EarlyOps()
	return "PDL on " + strconv.Itoa(n) + " " + plural(n, "edge", "edges"), nil
}

// earlyLaunches returns, by op ID, the launches of p that go early: nil
// when none does. An op C goes early after op P when
//   - P and C are consecutive on one stream: P is the last op run there
//     before C, and no wait comes between them (a wait brings in another
//     stream's work, which griddepcontrol.wait does not wait for; records
//     in between change nothing, as an event after P is reached only when
//     P ends);
//   - both are launches of kernels that wait on the device
//     (earlyCapable): C must, for correctness; P does, so that it
//     triggers its dependants at once;
//   - earlyPays(P, C, sms).
//
// Only the graph's own ops: the bodies of loops and branches run as
// conditional nodes, whose body graphs are left as they are.
func earlyLaunches(p *Plan, sms int) []bool {
	if p == nil || p.Graph == nil {
		return nil
	}
	var early []bool
	last := make([]int32, len(p.Streams)) // the op last run on each stream, or -1 after a wait
	for i := range last {
		last[i] = -1
	}
	for _, st := range p.Steps {
		if int(st.Stream) < 0 || int(st.Stream) >= len(last) {
			continue
		}
		switch st.Kind {
		case Wait:
			last[st.Stream] = -1
		case Run:
			if prev := last[st.Stream]; prev >= 0 {
				if earlyPays(planOp(p, prev), planOp(p, st.Op), sms) {
					if early == nil {
						early = make([]bool, len(p.Graph.Ops))
					}
					early[st.Op] = true
				}
			}
			last[st.Stream] = st.Op
		}
	}
	return early
}

// planOp is op id of p's graph, or nil.
func planOp(p *Plan, id int32) *dag.Op {
	if id < 0 || int(id) >= len(p.Graph.Ops) {
		return nil
	}
	return p.Graph.Ops[id]
}

// earlyCapable reports whether op is a kernel launch whose kernel waits for
// the kernel before it on the device before touching memory: dagrun's
// builtins do, a user's kernel when its launch says so (dag.LaunchSpec.Early).
func earlyCapable(op *dag.Op) bool {
	if op == nil || op.Kind != dag.Launch || op.Launch == nil || op.Launch.Kernel == nil {
		return false
	}
	return op.Launch.Kernel.Source == dag.Builtin || op.Launch.Early
}

// earlyPays reports whether launching consumer early after producer, its
// predecessor on one stream, pays: both wait on the device, and the grids
// are of dagrun's builtins, or small (earlyFits).
//
// A builtin waits for its producer first and triggers its dependant only
// then, so at most two grids of a chain are resident: the dependant's
// blocks take only the multiprocessors that the producer's last wave
// leaves. Measured on an H200 with chains of 1,000 dependent axpy kernels
// of that order (16 bytes a thread, blocks of 256; scripts/gpu/pdl_raw.cu),
// early launch took 0.84x the plain chain replayed at 64 KiB and 1 MiB
// (16 and 256 blocks) and 0.96x at 16 MiB (4,096 blocks: waves), and
// 0.82-0.84x eagerly. Triggered at once instead, before the wait, each
// grid launches the next: at 1 MiB the chain took 1.15-1.20x. A user's
// kernel says it waits but not where it triggers, so only its small grids
// go early.
func earlyPays(producer, consumer *dag.Op, sms int) bool {
	if !earlyCapable(producer) || !earlyCapable(consumer) || producer.Device != consumer.Device {
		return false
	}
	return earlyFits(producer, sms) && earlyFits(consumer, sms)
}

// earlyFits reports whether op's grid may go early: any grid of a builtin;
// a user kernel's when it fits the device at once with room to spare, at
// most earlyThreadsPerSM threads on each multiprocessor (4 blocks of 256
// a multiprocessor: 528 blocks on an H200's 132).
func earlyFits(op *dag.Op, sms int) bool {
	n, threads := op.Launch.Grid.Count(), op.Launch.Block.Count()
	if n < 1 || threads < 1 {
		return false
	}
	return op.Launch.Kernel.Source == dag.Builtin || n <= sms*max(1, earlyThreadsPerSM/threads)
}

// earlyThreadsPerSM is how many threads a multiprocessor takes of a user's
// grid that goes early: half of what an sm_90 multiprocessor holds
// (2,048), so that the producer and its early dependant fit side by side.
const earlyThreadsPerSM = 1024
