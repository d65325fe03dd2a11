package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/suggest"
)

// Updates: the changes Graph.Update applies between replays (SetArg,
// Rebind), the op variants they make, and the recapture that applies them.

// updates are the changes in effect on a graph.
type updates struct {
	args map[int][]dag.Arg           // by op ID: the launch arguments set by SetArg
	bind map[*dag.Buffer]*dag.Buffer // a buffer of the plan -> the buffer whose memory its ops use
}

func (u updates) clone() updates {
	return updates{args: maps.Clone(u.args), bind: maps.Clone(u.bind)}
}

// Change is a change Graph.Update makes between replays: SetArg or Rebind.
type Change interface {
	apply(g *Graph, u *updates) error
}

// Number is the Go types SetArg takes a scalar argument as.
type Number interface {
	~int | ~int32 | ~int64 | ~float32 | ~float64
}

// SetArg sets scalar parameter param of the kernel that op launches to
// value from the next replay on. op is one of the plan's ops, or its name
// (a name the plan lacks gets the nearest one as a hint). value is the
// parameter's type or any number it holds: integer parameters take
// integral values, f32 ones values f32 holds.
func SetArg[O *dag.Op | string, V Number](op O, param string, value V) Change {
	switch o := any(op).(type) {
	case *dag.Op:
		return setArg{op: o, param: param, value: float64(value)}
	case string:
		return setArg{name: o, param: param, value: float64(value)}
	}
	return nil // unreachable: O is one of the two
}

type setArg struct {
	op          *dag.Op
	name, param string
	value       float64
}

func (c setArg) apply(g *Graph, u *updates) error {
	op, err := g.lookup(c.op, c.name)
	if err != nil {
		return err
	}
	fail := func(msg, hint string) error {
		return &dag.Error{Op: op.Name, Field: c.param, Msg: msg, Hint: hint}
	}
	k := op.Kernel()
	if k == nil {
		return fail(fmt.Sprintf("SetArg: the op is a %s, not a kernel launch: it has no arguments", op.Kind), "set arguments of launch ops")
	}
	i := slices.IndexFunc(k.Params, func(p dag.Param) bool { return p.Name == c.param })
	var scalars []string
	for _, p := range k.Params {
		if p.Kind != dag.BufferParam {
			scalars = append(scalars, p.Name)
		}
	}
	if i < 0 {
		hint := fmt.Sprintf("its scalar parameters are %v", scalars)
		budget := 1 << 16
		if best, ok := suggest.Nearest(c.param, scalars, &budget); ok {
			hint = fmt.Sprintf("did you mean %q?", best)
		}
		return fail(fmt.Sprintf("SetArg: kernel %s has no parameter %q", k.Name, c.param), hint)
	}
	args := slices.Clone(u.args[op.ID])
	if args == nil {
		args = slices.Clone(op.Launch.Args)
	}
	a := &args[i]
	switch p := k.Params[i]; p.Kind {
	case dag.BufferParam:
		return fail(fmt.Sprintf("SetArg: %s is a buffer parameter of kernel %s", c.param, k.Name), "use Rebind to make the op use another buffer")
	case dag.I32Param, dag.I64Param:
		if k.Source == dag.Builtin {
			return fail(fmt.Sprintf("SetArg: %s of builtin kernel %s is a dimension the graph's buffers were checked against", c.param, k.Name),
				"build a graph with the new dimensions")
		}
		lim := float64(math.MaxInt32)
		if p.Kind == dag.I64Param {
			lim = 1 << 53
		}
		if c.value != math.Trunc(c.value) || math.Abs(c.value) > lim {
			return fail(fmt.Sprintf("SetArg: %v is not a value of %s parameter %s", c.value, p.Kind, c.param), "give an integer in the parameter's range")
		}
		a.Int, a.Float = int64(c.value), c.value
	case dag.F32Param:
		if !math.IsInf(c.value, 0) && math.IsInf(float64(float32(c.value)), 0) {
			return fail(fmt.Sprintf("SetArg: %g is beyond the largest f32, the type of %s", c.value, c.param), "give a value f32 holds")
		}
		a.Int, a.Float = int64(c.value), c.value // as dag.Builder.Launch stores numbers
	default:
		a.Int, a.Float = int64(c.value), c.value
	}
	if slices.Equal(args, op.Launch.Args) {
		delete(u.args, op.ID) // back to the plan's own op
		return nil
	}
	if u.args == nil {
		u.args = map[int][]dag.Arg{}
	}
	u.args[op.ID] = args
	return nil
}

// lookup finds one of the plan's ops by pointer or by name.
func (g *Graph) lookup(op *dag.Op, name string) (*dag.Op, error) {
	ops := g.s.p.Graph.Ops
	if op != nil {
		// An op of the graph as declared runs as the plan's copy of it
		// where the planner fused ops (planner.Plan.Running).
		running := g.s.p.Running(op)
		if running == nil {
			return nil, &dag.Error{Op: op.Name, Msg: "SetArg: the op is not one of the captured plan's", Hint: "pass an op of the graph the plan was made from, or its name"}
		}
		return running, nil
	}
	if g.byName == nil {
		g.byName = make(map[string]*dag.Op, len(ops))
		for _, o := range ops {
			g.byName[o.Name] = o
		}
	}
	if o := g.byName[name]; o != nil {
		return o, nil
	}
	hint := "name an op of the plan (dagrun plan lists them)"
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = o.Name
	}
	budget := 1 << 20
	if best, ok := suggest.Nearest(name, names, &budget); ok {
		hint = fmt.Sprintf("did you mean %q?", best)
	}
	return nil, &dag.Error{Op: name, Msg: fmt.Sprintf("SetArg: the plan has no op called %q", name), Hint: hint}
}

// Rebind makes the ops that use buf use the memory of to instead, from the
// next replay on: to switch between input batches without copying. Both
// must be persistent buffers of the plan's graph of the same size and
// placement, and to must not be memory that other ops of the plan use (so
// that the plan's ordering still covers every conflict). Rebind(buf, buf)
// undoes it.
func Rebind(buf, to *dag.Buffer) Change { return rebind{buf: buf, to: to} }

type rebind struct{ buf, to *dag.Buffer }

func (c rebind) apply(g *Graph, u *updates) error {
	bufs := g.s.p.Graph.Buffers
	for _, b := range []*dag.Buffer{c.buf, c.to} {
		if b == nil || b.ID < 0 || b.ID >= len(bufs) || bufs[b.ID] != b {
			return &dag.Error{Buffer: fmt.Sprint(b), Msg: "Rebind: not a buffer of the captured plan's graph", Hint: "declare both buffers in the graph the plan was made from"}
		}
		if b.Temporary {
			return &dag.Error{Buffer: b.Name, Msg: "Rebind: the buffer is temporary: its memory is allocated inside each replay", Hint: "rebind persistent buffers"}
		}
	}
	b, to := c.buf, c.to
	switch {
	case b.Size != to.Size:
		return &dag.Error{Buffer: b.Name, Msg: fmt.Sprintf("Rebind: %s has %d bytes, %s %d", b.Name, b.Size, to.Name, to.Size), Hint: "rebind to a buffer of the same size"}
	case b.Placement != to.Placement || (b.Placement == dag.Device && b.Device != to.Device):
		return &dag.Error{Buffer: b.Name, Msg: fmt.Sprintf("Rebind: %s is %s memory, %s is %s", b.Name, where(b), to.Name, where(to)), Hint: "rebind to a buffer of the same placement and device"}
	}
	if u.bind == nil {
		u.bind = map[*dag.Buffer]*dag.Buffer{}
	}
	if to == b {
		delete(u.bind, b)
	} else {
		u.bind[b] = to
	}
	return nil
}

func where(b *dag.Buffer) string {
	if b.Placement == dag.Device {
		return fmt.Sprintf("device %d", b.Device)
	}
	return b.Placement.String() + " host"
}

// checkBindings makes sure no two buffers the plan uses share memory.
func (g *Graph) checkBindings(u updates) error {
	owner := map[*dag.Buffer]*dag.Buffer{}
	var errs []error
	for _, b := range g.s.p.Graph.Buffers {
		if !g.used[b.ID] {
			continue
		}
		mem := b
		if to := u.bind[b]; to != nil {
			mem = to
		}
		if other := owner[mem]; other != nil {
			errs = append(errs, &dag.Error{Buffer: other.Name,
				Msg:  fmt.Sprintf("Rebind: %s and %s would both use the memory of %s; the plan orders the ops of each buffer, not of two buffers sharing memory", other.Name, b.Name, mem.Name),
				Hint: "rebind to a buffer no op of the plan uses (declare a spare buffer of the same size)"})
			continue
		}
		owner[mem] = b
	}
	return errors.Join(errs...)
}

// variants returns what each op is submitted as under u: the plan's op
// where nothing changes it, else a copy with the arguments and buffers in
// effect. A variant equal to the one in use is kept, so that a backend can
// reuse what it made for it.
func (g *Graph) variants(u updates) []*dag.Op {
	plan := g.s.p.Graph.Ops
	out := make([]*dag.Op, len(plan))
	for i, op := range plan {
		args, setArgs := u.args[i]
		rebound := false
		for _, a := range op.Access {
			if u.bind[a.Buf] != nil {
				rebound = true
				break
			}
		}
		if !setArgs && !rebound {
			out[i] = op
			continue
		}
		v := *op
		v.Access = slices.Clone(op.Access)
		for j := range v.Access {
			if to := u.bind[v.Access[j].Buf]; to != nil {
				v.Access[j].Buf = to
			}
		}
		if setArgs {
			l := *op.Launch
			l.Args = args
			v.Launch = &l
		}
		if prev := g.ops[i]; prev != op && sameVariant(prev, &v) {
			out[i] = prev
		} else {
			out[i] = &v
		}
	}
	return out
}

func sameVariant(a, b *dag.Op) bool {
	if !slices.Equal(a.Access, b.Access) {
		return false
	}
	return a.Launch == nil || b.Launch == nil || slices.Equal(a.Launch.Args, b.Launch.Args)
}

// Update applies changes from the next replay on, without re-planning: it
// recaptures the plan with the changed ops and applies the capture to the
// executable graph in place where the backend can (kernel arguments and
// buffer addresses usually can), else instantiates it anew; Stats counts
// which. It waits for launched replays first. On error the graph is left
// as it was.
func (g *Graph) Update(ctx context.Context, changes ...Change) error {
	if g.unusable() { // zero.go
		return errGraphClosed
	}
	next, ops, err := g.next(changes)
	if err != nil {
		return err
	}
	if slices.Equal(ops, g.ops) {
		g.state = next
		return nil
	}
	if g.pending {
		if err := g.Sync(ctx); err != nil {
			return fmt.Errorf("executor: Update: waiting for the launched replays: %w", err)
		}
	}
	start := time.Now()
	fresh, err := g.record(ctx, ops)
	if err != nil {
		return err
	}
	inPlace, err := g.c.UpdateGraph(g.id, fresh)
	if err != nil {
		return fmt.Errorf("executor: Update: %w", err)
	}
	g.stats.UpdateTime += time.Since(start)
	g.stats.Updates++
	if inPlace {
		g.stats.UpdatesInPlace++
	} else {
		g.stats.Reinstantiations++
	}
	g.ops, g.state = ops, next
	return nil
}

// next is the state of changes, and what each op is submitted as, after
// changes; g is left as it was.
func (g *Graph) next(changes []Change) (updates, []*dag.Op, error) {
	next := g.state.clone()
	var errs []error
	for _, c := range changes {
		if c == nil {
			errs = append(errs, errors.New("executor: Update: a nil change"))
			continue
		}
		if err := c.apply(g, &next); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return updates{}, nil, err
	}
	if err := g.checkBindings(next); err != nil {
		return updates{}, nil, err
	}
	return next, g.variants(next), nil
}
