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
	"github.com/dagrun/dagrun/planner"
)

// Capturer is implemented by backends that can record a plan's submission
// once and replay it (CUDA graphs; the cpu backend's frozen schedules).
// Between BeginCapture and EndCapture, Run, Record and Wait calls are
// recorded, not run. Graphs are numbered by the backend.
type Capturer interface {
	// BeginCapture starts recording on stream origin and forks every
	// other stream from it.
	BeginCapture(origin int) error
	// EndCapture joins every stream back into origin and ends the
	// recording; the graph it returns is not launchable yet.
	EndCapture(origin int) (graph int, err error)
	// Instantiate makes a captured graph launchable.
	Instantiate(graph int) error
	// LaunchGraph enqueues one replay of an instantiated graph on stream.
	LaunchGraph(graph, stream int) error
	// UpdateGraph makes instantiated graph do what freshly captured graph
	// fresh does, in place if it can (inPlace), else by instantiating fresh
	// in its place. fresh is used up either way.
	UpdateGraph(graph, fresh int) (inPlace bool, err error)
	// DestroyGraph releases a graph and its executable.
	DestroyGraph(graph int) error
}

// Writer is implemented by backends that can overwrite a persistent
// buffer between runs (Session.Write).
type Writer interface {
	Write(b *dag.Buffer, data []byte) error
}

// originStream is the stream a capture starts and ends on and replays are
// launched on: the plan's first stream. It is on the plan's device and
// exists in every plan with ops, so no extra stream is made for it; work
// launched on it before or after a replay is ordered with the whole replay.
const originStream = 0

// Graph is a plan captured once and replayed many times: the plan's
// submission is paid for once, and a replay is one launch. Make one with
// Session.Capture. Like its Session, a Graph is for one goroutine.
type Graph struct {
	s       *Session
	c       Capturer
	id      int       // the backend's graph number
	ops     []*dag.Op // what each op ID is submitted as: the plan's op, or a variant after Update
	state   updates   // the changes in effect
	used    []bool    // by buffer ID: does an op of the plan access it
	byName  map[string]*dag.Op
	stats   GraphStats
	pending bool // launched since the last Sync
	closed  bool
}

// GraphStats are the figures of a captured graph.
type GraphStats struct {
	Capture          time.Duration // submitting the plan into the first capture
	Instantiate      time.Duration // making the first capture launchable
	Launches         int           // replays launched
	Updates          int           // Update calls that changed the graph
	UpdatesInPlace   int           // ... applied to the executable graph as it was
	Reinstantiations int           // ... that the backend refused in place, so instantiated anew
	UpdateTime       time.Duration // spent in Update: recapture plus update or instantiation
}

// updates are the changes in effect on a graph.
type updates struct {
	args map[int][]dag.Arg           // by op ID: the launch arguments set by SetArg
	bind map[*dag.Buffer]*dag.Buffer // a buffer of the plan -> the buffer whose memory its ops use
}

func (u updates) clone() updates {
	return updates{args: maps.Clone(u.args), bind: maps.Clone(u.bind)}
}

// CheckCapture reports, naming each op and the fix, what in plan p a
// captured graph cannot hold: copies between pageable host memory and a
// device (the driver does them synchronously, outside stream order), and
// work on a device other than the one the graph is captured on (the first
// stream's).
func CheckCapture(p *planner.Plan) error {
	if p == nil || p.Graph == nil {
		return errors.New("executor: no plan, or a plan without a graph")
	}
	if len(p.Streams) == 0 {
		return errors.New("executor: the plan has no streams (no ops): there is nothing to capture")
	}
	dev := p.Streams[originStream].Device
	var errs []error
	for _, op := range p.Graph.Ops {
		if op.Device != dev {
			errs = append(errs, &dag.Error{Op: op.Name, Field: "device",
				Msg:  fmt.Sprintf("runs on device %d, but the graph is captured on device %d: a graph holds the work of one device", op.Device, dev),
				Hint: "split the plan per device and capture one graph for each, or run it eagerly"})
			continue
		}
		for _, a := range op.Access {
			if a.Buf.Placement == dag.Device && a.Buf.Device != dev {
				errs = append(errs, &dag.Error{Op: op.Name, Buffer: a.Buf.Name, Field: "device",
					Msg:  fmt.Sprintf("uses buffer %s on device %d, but the graph is captured on device %d: a graph holds the work of one device", a.Buf.Name, a.Buf.Device, dev),
					Hint: "split the plan per device and capture one graph for each, or run it eagerly"})
				break
			}
		}
		if !op.SyncCopy() {
			continue
		}
		host, dev := op.Access[0].Buf, op.Access[1].Buf
		if host.Placement != dag.Pageable {
			host, dev = dev, host
		}
		errs = append(errs, &dag.Error{Op: op.Name, Buffer: host.Name, Field: "placement",
			Msg:  fmt.Sprintf("copies between pageable host buffer %s and device buffer %s: such copies are synchronous and a graph cannot hold them", host.Name, dev.Name),
			Hint: fmt.Sprintf("use pinned memory: make %s pinned (placement: pinned, or dag.PinnedHost())", host.Name)})
	}
	return errors.Join(errs...)
}

// Capture records the session's plan as a graph and makes it launchable.
// It checks first (CheckCapture) and refuses, naming the ops, what a graph
// cannot hold. The backend must implement Capturer. The graph is released
// by Graph.Close, or by the session's Close.
func (s *Session) Capture(ctx context.Context) (*Graph, error) {
	if s.closed {
		return nil, errors.New("executor: Capture: session is closed")
	}
	c, ok := s.b.(Capturer)
	if !ok {
		return nil, fmt.Errorf("executor: Capture: backend %T cannot capture graphs; run the plan eagerly with Session.Run", s.b)
	}
	if err := CheckCapture(s.p); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("executor: capture not started: %w", err)
	}
	g := &Graph{s: s, c: c, ops: slices.Clone(s.p.Graph.Ops), used: make([]bool, len(s.p.Graph.Buffers))}
	for _, op := range g.ops {
		for _, a := range op.Access {
			g.used[a.Buf.ID] = true
		}
	}
	start := time.Now()
	id, err := g.record(ctx, g.ops)
	if err != nil {
		return nil, err
	}
	g.stats.Capture = time.Since(start)
	start = time.Now()
	if err := c.Instantiate(id); err != nil {
		return nil, errors.Join(fmt.Errorf("executor: instantiate the captured graph: %w", err), c.DestroyGraph(id))
	}
	g.stats.Instantiate = time.Since(start)
	g.id = id
	s.graphs = append(s.graphs, g)
	return g, nil
}

// record submits the plan's steps, with ops[i] for op i, into a capture
// and returns the captured graph.
func (g *Graph) record(ctx context.Context, ops []*dag.Op) (int, error) {
	c := g.c
	if err := c.BeginCapture(originStream); err != nil {
		return -1, fmt.Errorf("executor: begin capture: %w", err)
	}
	if err := g.s.submit(ctx, ops, "capture"); err != nil {
		if id, endErr := c.EndCapture(originStream); endErr == nil {
			err = errors.Join(err, c.DestroyGraph(id))
		}
		return -1, err
	}
	id, err := c.EndCapture(originStream)
	if err != nil {
		return -1, fmt.Errorf("executor: end capture: %w", err)
	}
	return id, nil
}

var errGraphClosed = errors.New("executor: the graph is closed")

// Launch enqueues one replay and returns; Sync waits for it. Replays run
// in launch order, each after the one before.
func (g *Graph) Launch(ctx context.Context) error {
	if g.closed {
		return errGraphClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("executor: replay not launched: %w", err)
	}
	if err := g.c.LaunchGraph(g.id, originStream); err != nil {
		return fmt.Errorf("executor: launch graph: %w", err)
	}
	g.stats.Launches++
	g.pending = true
	return nil
}

// Sync waits for the launched replays. A failing op is a *dag.OpError
// naming it; when ctx ends first the error wraps ctx.Err().
func (g *Graph) Sync(ctx context.Context) error {
	if g.closed {
		return errGraphClosed
	}
	g.pending = false
	return g.s.syncError(ctx, g.s.b.Sync(ctx))
}

// Run replays the graph once and waits for it.
func (g *Graph) Run(ctx context.Context) error {
	if err := g.Launch(ctx); err != nil {
		return err
	}
	return g.Sync(ctx)
}

// Stats returns the graph's figures.
func (g *Graph) Stats() GraphStats { return g.stats }

// Close releases the graph. Closing twice is harmless; closing the
// session closes its graphs.
func (g *Graph) Close() error {
	if g.closed {
		return nil
	}
	var err error
	if g.pending {
		err = g.Sync(context.Background())
	}
	g.closed = true
	if i := slices.Index(g.s.graphs, g); i >= 0 {
		g.s.graphs = slices.Delete(g.s.graphs, i, i+1)
	}
	if derr := g.c.DestroyGraph(g.id); derr != nil {
		err = errors.Join(err, fmt.Errorf("executor: destroy graph: %w", derr))
	}
	return err
}

// Change is a change Graph.Update makes between replays: SetArg or Rebind.
type Change interface {
	apply(g *Graph, u *updates) error
}

// SetArg sets scalar parameter param of the kernel that op launches to
// value from the next replay on. op is one of the plan's ops, or its name.
// Integer parameters take integral values.
func SetArg[O *dag.Op | string](op O, param string, value float64) Change {
	switch o := any(op).(type) {
	case *dag.Op:
		return setArg{op: o, param: param, value: value}
	case string:
		return setArg{name: o, param: param, value: value}
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
	if op.Kind != dag.Launch {
		return fail(fmt.Sprintf("SetArg: the op is a %s, not a kernel launch: it has no arguments", op.Kind), "set arguments of launch ops")
	}
	k := op.Launch.Kernel
	i := slices.IndexFunc(k.Params, func(p dag.Param) bool { return p.Name == c.param })
	var scalars []string
	for _, p := range k.Params {
		if p.Kind != dag.BufferParam {
			scalars = append(scalars, p.Name)
		}
	}
	if i < 0 {
		return fail(fmt.Sprintf("SetArg: kernel %s has no parameter %q", k.Name, c.param), fmt.Sprintf("its scalar parameters are %v", scalars))
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
	default:
		a.Int, a.Float = int64(c.value), c.value // as dag.Builder.Launch stores numbers
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
		if op.ID < 0 || op.ID >= len(ops) || ops[op.ID] != op {
			return nil, &dag.Error{Op: op.Name, Msg: "SetArg: the op is not one of the captured plan's", Hint: "pass an op of the graph the plan was made from, or its name"}
		}
		return op, nil
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
	return nil, &dag.Error{Op: name, Msg: fmt.Sprintf("SetArg: the plan has no op called %q", name), Hint: "name an op of the plan (dagrun plan lists them)"}
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
	if g.closed {
		return errGraphClosed
	}
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
		return err
	}
	if err := g.checkBindings(next); err != nil {
		return err
	}
	ops := g.variants(next)
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

// Write replaces the contents of persistent buffer b with data (b's size)
// before the next run or replay: a new input batch. Call it when the runs
// and replays launched before are done. The backend must implement Writer.
func (s *Session) Write(b *dag.Buffer, data []byte) error {
	if err := s.checkBuffer("Write", b); err != nil {
		return err
	}
	w, ok := s.b.(Writer)
	if !ok {
		return fmt.Errorf("executor: Write: backend %T cannot write buffers", s.b)
	}
	if err := w.Write(b, data); err != nil {
		return fmt.Errorf("executor: write %q: %w", b.Name, err)
	}
	return nil
}
