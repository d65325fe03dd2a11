package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// originStream is the stream a capture starts and ends on and replays are
// launched on: the plan's first stream. It is on the plan's device and
// exists in every plan with ops, so no extra stream is made for it; work
// launched on it before or after a replay is ordered with the whole replay.
const originStream = 0

// Graph is a plan captured once and replayed many times: the plan's
// submission is paid for once, and a replay is one launch. Make one with
// Session.Capture. Like its Session, a Graph is for one goroutine: a
// Launch, Sync or Run while another call of the session or its graphs is
// in flight is an error. Close is safe from any goroutine.
type Graph struct {
	s       *Session
	c       device.Capturer
	id      int       // the backend's graph number
	ops     []*dag.Op // what each op ID is submitted as: the plan's op, or a variant after Update
	state   updates   // the changes in effect
	used    []bool    // by buffer ID: does an op of the plan access it
	byName  map[string]*dag.Op
	stats   GraphStats
	pending bool        // launched since the last Sync
	auto    bool        // captured by the session itself (autocapture.go)
	closed  atomic.Bool // read from any goroutine: Session.Close may close it

	// launched are the graph's launches since its spans were last read,
	// by the backend's replay number (profile.go).
	launched []launchRange
	// spansHint is how many spans ReplaySpans read last time: room made
	// for as many at once next time.
	spansHint int
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

// CheckCapture reports, naming each op and the fix, what in plan p a
// captured graph cannot hold: copies between pageable host memory and a
// device (the driver does them synchronously, outside stream order). Work
// on several devices is captured as one graph: streams of every device
// fork from the origin stream and join back.
func CheckCapture(p *planner.Plan) error {
	if p == nil || p.Graph == nil {
		return errors.New("executor: no plan, or a plan without a graph")
	}
	if len(p.Streams) == 0 {
		return errors.New("executor: the plan has no streams (no ops): there is nothing to capture")
	}
	var errs []error
	for _, op := range p.Graph.Ops {
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
func (s *Session) Capture(ctx context.Context) (g *Graph, err error) {
	if s.unusable() { // zero.go
		return nil, fmt.Errorf("executor: Capture: session is %w", device.ErrClosed)
	}
	ctx, end, err := s.flight.begin(ctx, &s.closed, "Capture") // close.go: Close from another goroutine
	if err != nil {
		return nil, err
	}
	defer end(&err)
	return s.capture(ctx, nil)
}

// capture is Capture for a caller holding the session's flight. from,
// when not nil, is the state of changes the graph starts with (the
// session's own, for an automatic capture); nil is the plan as it is.
func (s *Session) capture(ctx context.Context, from *Graph) (g *Graph, err error) {
	c, ok := s.d.(device.Capturer)
	if !ok {
		return nil, fmt.Errorf("executor: Capture: device session %T cannot capture graphs; run the plan eagerly with Session.Run", s.d)
	}
	if err := CheckCapture(s.p); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("executor: capture not started: %w", err)
	}
	g = s.newGraph(c)
	if from != nil {
		g.ops, g.state = slices.Clone(from.ops), from.state.clone()
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

// newGraph is a graph of the plan as it is, not yet captured: c is nil
// for the session's own record of changes to its eager runs.
func (s *Session) newGraph(c device.Capturer) *Graph {
	g := &Graph{s: s, c: c, ops: slices.Clone(s.p.Graph.Ops), used: make([]bool, len(s.p.Graph.Buffers))}
	for _, op := range g.ops {
		for _, a := range op.Access {
			g.used[a.Buf.ID] = true
		}
	}
	return g
}

// record submits the plan's steps, with ops[i] for op i, into a capture
// and returns the captured graph.
func (g *Graph) record(ctx context.Context, ops []*dag.Op) (int, error) {
	c := g.c
	if err := c.BeginCapture(originStream); err != nil {
		return -1, fmt.Errorf("executor: begin capture: %w", err)
	}
	if err := g.s.sub.submit(ctx, ops, "capture"); err != nil {
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

var errGraphClosed = fmt.Errorf("executor: the graph is %w", device.ErrClosed)

// Launch enqueues one replay and returns; Sync waits for it. Replays run
// in launch order, each after the one before.
func (g *Graph) Launch(ctx context.Context) (err error) {
	if g.unusable() { // zero.go
		return errGraphClosed
	}
	ctx, end, err := g.s.flight.begin(ctx, &g.s.closed, "Graph.Launch")
	if err != nil {
		return err
	}
	defer end(&err)
	return g.launch(ctx)
}

func (g *Graph) launch(ctx context.Context) error {
	if g.closed.Load() {
		return errGraphClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("executor: replay not launched: %w", err)
	}
	if err := g.c.LaunchGraph(g.id, originStream); err != nil {
		return fmt.Errorf("executor: launch graph: %w", err)
	}
	g.stats.Launches++
	g.s.beside.noteGraph(g) // beside.go
	g.noteLaunch()          // profile.go
	if g.auto {
		g.s.auto.noteRuns(1, true) // autocapture.go
	}
	g.pending = true
	return nil
}

// Sync waits for the launched replays. A failing op is a *dag.OpError
// naming it; when ctx ends first the error wraps ctx.Err().
func (g *Graph) Sync(ctx context.Context) (err error) {
	if g.unusable() { // zero.go
		return errGraphClosed
	}
	ctx, end, err := g.s.flight.begin(ctx, &g.s.closed, "Graph.Sync")
	if err != nil {
		return err
	}
	defer end(&err)
	return g.sync(ctx)
}

func (g *Graph) sync(ctx context.Context) error {
	g.pending = false
	return syncError(ctx, g.s.beside.sync(ctx))
}

// Run replays the graph once and waits for it; it never waits past ctx.
func (g *Graph) Run(ctx context.Context) (err error) {
	if g.unusable() { // zero.go
		return errGraphClosed
	}
	ctx, end, err := g.s.flight.begin(ctx, &g.s.closed, "Graph.Run")
	if err != nil {
		return err
	}
	defer end(&err)
	if err := g.launch(ctx); err != nil {
		return err
	}
	return g.sync(ctx)
}

// Stats returns the graph's figures.
func (g *Graph) Stats() GraphStats { return g.stats }

// Close releases the graph. It is safe from any goroutine: it waits for
// the call of the session or its graphs in flight. Closing twice is
// harmless; closing the session closes its graphs.
func (g *Graph) Close() error {
	if g.s == nil || g.c == nil { // zero.go
		return nil
	}
	_, end := g.s.flight.hold(context.Background()) // close.go
	defer end(new(error))
	return g.closeHeld()
}

// closeHeld closes the graph; the caller holds the session's flight.
func (g *Graph) closeHeld() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if g.pending {
		err = g.sync(context.Background())
	}
	if i := slices.Index(g.s.graphs, g); i >= 0 {
		g.s.graphs = slices.Delete(g.s.graphs, i, i+1)
	}
	if derr := g.c.DestroyGraph(g.id); derr != nil {
		err = errors.Join(err, fmt.Errorf("executor: destroy graph: %w", derr))
	}
	return err
}

// captureWhileRunning reports whether s's plan may be captured while its
// first run runs (runCapturing): a plan the backend can capture, untimed
// (a timer's records of the run and of the capture would mix), without
// host steps or stream tasks (their host side runs while the capture
// records), loops or branches (their bodies are captured at their first
// run) or collectives (every rank must see the same calls in one order).
func captureWhileRunning(s *Session) bool {
	if _, ok := s.d.(device.Capturer); !ok || s.time.timer != nil || CheckCapture(s.p) != nil {
		return false
	}
	for _, op := range s.p.Graph.Ops {
		switch {
		case op.Kind == dag.Host, op.Kind == dag.Task, op.Kind == dag.While, op.Kind == dag.If, op.Kind.IsCollective():
			return false
		}
	}
	return true
}

// runCapturing runs s's plan eagerly, as Session.Run does, and captures
// it while the device runs it: capturing records and instantiates on the
// host, which an eager run leaves idle until its work ends, so the first
// run of a plan costs about its eager run rather than that and a capture.
// It returns the graph, captured whether the run failed or not (the run's
// error is returned beside it), or nil when the capture failed. Only for
// plans captureWhileRunning accepts. beside, when not nil, runs after the
// capture, while the device still runs: its error joins the others.
func runCapturing(ctx context.Context, s *Session, beside func() error) (g *Graph, err error) {
	ctx, end, err := beginRun(ctx, s)
	if err != nil {
		return nil, err
	}
	defer end(&err)
	err = runEager(ctx, s, func() error {
		var cerr error
		if g, cerr = s.capture(ctx, nil); cerr != nil {
			cerr = fmt.Errorf("executor: capture while the first run ran: %w", cerr)
		}
		if beside != nil {
			cerr = errors.Join(cerr, beside())
		}
		return cerr
	})
	return g, err
}
