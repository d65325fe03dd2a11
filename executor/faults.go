package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// ErrInjected is the error of an op that WithFailOp made fail.
var ErrInjected = errors.New("injected fault (fail-op)")

// ChaosMaxDelay bounds the pauses WithChaos puts before ops.
const ChaosMaxDelay = 500 * time.Microsecond

// faultConfig is the fault injection asked for by Options.
type faultConfig struct {
	chaos  bool
	seed   uint64
	failOp string
}

// WithChaos puts a pause of a random length below ChaosMaxDelay before
// about half the ops of every eager run, on the op's stream, drawn from
// seed, the op and the run: the same seed gives the same pauses. It
// shakes the timing of a plan without changing what it computes (on the
// cpu backend a worker sleeps; on CUDA a spin kernel runs on the stream).
// The device session must implement device.Delayer; graph captures and
// replays run without pauses.
func WithChaos(seed uint64) Option {
	return func(c *config) { c.faults.chaos, c.faults.seed = true, seed }
}

// WithFailOp makes the op called name fail whenever an eager run reaches
// it, with a *dag.OpError naming it that wraps ErrInjected. The op does
// not run at all: its failure is enqueued in its place on its stream (on
// CUDA as a host callback, never in a kernel, whose fault would ruin the
// context), and nothing after it in the plan is submitted, so no op can
// use a temporary whose alloc was the failed op. The run then waits for
// what was submitted and returns the failure. An op of a loop's or
// branch's body fails where the backend runs it, each time an eager run
// reaches it (the device session must implement device.BodyFailer). A
// declared op that the plan fused into another or split into pieces
// (planner.Plan.Parts) fails that op or its first piece, the failure
// naming the declared op. Open refuses a name
// the plan has no op of. The device session must implement device.Failer.
func WithFailOp(name string) Option {
	return func(c *config) { c.faults.failOp = name }
}

// injector enqueues the faults of a session before its ops.
type injector struct {
	delayer device.Delayer // nil without chaos
	seed    uint64
	runs    uint64 // eager runs started, for the draws
	failer  device.Failer
	failOp  int // the op ID to fail; -1 for none
	// failAs is the op the failure names: the op itself, or the declared
	// op called by WithFailOp's name that a fused op runs, so that the
	// failure is reported where the program declares it.
	failAs *dag.Op
}

// newInjector checks that d can inject the faults of cfg, for the ops of
// p's graph (or the declared ops they run).
func newInjector(d device.Session, p *planner.Plan, cfg faultConfig) (*injector, error) {
	g := p.Graph
	if !cfg.chaos && cfg.failOp == "" {
		return nil, nil
	}
	in := &injector{seed: cfg.seed, failOp: -1}
	if cfg.chaos {
		dl, ok := d.(device.Delayer)
		if !ok {
			return nil, fmt.Errorf("executor: WithChaos: device session %T cannot enqueue delays (device.Delayer)", d)
		}
		in.delayer = dl
	}
	if cfg.failOp != "" {
		f, ok := d.(device.Failer)
		if !ok {
			return nil, fmt.Errorf("executor: WithFailOp: device session %T cannot enqueue failures (device.Failer)", d)
		}
		in.failer = f
		for _, op := range g.Ops {
			if op.Name == cfg.failOp {
				in.failOp, in.failAs = op.ID, op
				break
			}
		}
		if in.failOp < 0 {
			if id, part := fusedPart(p, cfg.failOp); part != nil {
				as := *part
				as.ID = id
				in.failOp, in.failAs = id, &as
				return in, nil
			}
			if err := failInBody(d, g, cfg.failOp); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

// checkFaultOp refuses WithFailOp of an op p lacks before anything is
// opened.
func checkFaultOp(p *planner.Plan, cfg faultConfig) error {
	if cfg.failOp == "" {
		return nil
	}
	if bodyOp(p.Graph, cfg.failOp) != nil {
		return nil
	}
	if _, part := fusedPart(p, cfg.failOp); part != nil {
		return nil
	}
	return fmt.Errorf("executor: WithFailOp: the plan has no op %q", cfg.failOp)
}

// fusedPart is the declared op called name that an op of p's graph runs
// as a part (a launch fused into a gemm, say) or in pieces (its first),
// and that op's ID; nil when no op runs one of that name.
func fusedPart(p *planner.Plan, name string) (int, *dag.Op) {
	if p.Declared == nil {
		return -1, nil
	}
	for id := range p.Graph.Ops {
		for _, op := range p.PartsOf(id) {
			if op.Name == name {
				return id, op
			}
		}
	}
	return -1, nil
}

// bodyOp is the op called name, of g or of the body of one of its loops
// and branches; nil for none.
func bodyOp(g *dag.Graph, name string) *dag.Op {
	var found *dag.Op
	g.Walk(func(op *dag.Op) {
		if found == nil && op.Name == name {
			found = op
		}
	})
	return found
}

// failInBody has the backend fail the op called name, of a body: the
// executor never submits it, so the backend injects its failure where
// the body runs it.
func failInBody(d device.Session, g *dag.Graph, name string) error {
	op := bodyOp(g, name)
	if op == nil {
		return fmt.Errorf("executor: WithFailOp: the plan has no op %q", name)
	}
	bf, ok := d.(device.BodyFailer)
	if !ok {
		return fmt.Errorf("executor: WithFailOp: op %q is in the body of a loop or branch, and device session %T cannot fail such ops (device.BodyFailer)", name, d)
	}
	if err := bf.FailInBody(op, ErrInjected); err != nil {
		return fmt.Errorf("executor: WithFailOp: %w", err)
	}
	return nil
}

// startRun draws the pauses of a new run.
func (in *injector) startRun() {
	if in != nil {
		in.runs++
	}
}

// before enqueues the faults due before op on stream. It reports whether
// op is replaced by its failure, and so must not be submitted.
func (in *injector) before(stream int, op *dag.Op) (replaced bool, err error) {
	if in == nil {
		return false, nil
	}
	if in.delayer != nil {
		if d := in.draw(op); d > 0 {
			if err := in.delayer.Delay(stream, d); err != nil {
				return false, fmt.Errorf("chaos delay: %w", err)
			}
		}
	}
	if op.ID == in.failOp {
		if err := in.failer.Fail(stream, in.failAs, ErrInjected); err != nil {
			return false, fmt.Errorf("fail-op: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// draw is the pause before op in this run: none for about half the ops,
// else below ChaosMaxDelay.
func (in *injector) draw(op *dag.Op) time.Duration {
	x := mix(in.seed ^ mix(in.runs<<32^uint64(op.ID)))
	if x>>63 == 0 {
		return 0
	}
	return time.Duration((x >> 1) % uint64(ChaosMaxDelay))
}

// mix is the SplitMix64 finaliser: a cheap, well-spread hash.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
