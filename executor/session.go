package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// Option configures a Session.
type Option func(*config)

type config struct {
	world  worldConfig // world.go
	timing bool

	profile             // profile.go
	faults  faultConfig // faults.go

	temporaries TemporaryMode // arena.go
	lend        *lending      // shapes_memory.go: the memory a Shapes' session takes from its holder
	auto        int           // autocapture.go: identical eager runs before capture; 0: never
	run         runConfig     // run.go: Run's own, which Open ignores
	runner      runnerConfig  // runner.go: a Runner's own, which Open ignores
	shapes      shapesConfig  // shapes.go: a Shapes' own, which Open ignores
}

// WithTiming asks the device session, if it implements device.Timer, for
// the start and end of every op, which Spans then returns.
func WithTiming() Option { return func(c *config) { c.timing = true } }

// Session is a plan opened on a backend: a device.Session holding its
// buffers, streams and events. Run it as often as wanted; persistent
// buffers carry their contents from one run to the next. A Session is not
// safe for use by several goroutines at once, but several sessions, on one
// backend or several, may each run from a goroutine of its own.
type Session struct {
	b      device.Backend // for what the backend tells of the session (Unfused)
	d      device.Session
	p      *planner.Plan
	sub    submitter // submit.go: the plan's steps to the device session
	time   timing    // profile.go: op timing and the last run's spans
	beside beside    // beside.go: what launched work may use, until Sync
	made   made      // control.go: the streams and events made, and more
	graphs []*Graph  // captured and not closed

	closed  atomic.Bool
	closing sync.Once // Close's work, done once; a second Close waits for it
	flight  inflight  // close.go: the run in flight, for a Close from another goroutine

	arenas bool        // the temporaries live in arenas (arena.go)
	auto   autoCapture // autocapture.go: automatic capture, the runs' log, Update of eager runs
	early  early       // early.go: the launches that go early, and why not
}

// Open opens plan p on backend b: a device session for p's graph (b.Open),
// then one stream per plan stream (with its device and priority) and one
// event per plan event. On error everything made so far is released. The
// backend stays open when the session closes: open many sessions on one
// backend, and close it when they are done.
func Open(ctx context.Context, b device.Backend, p *planner.Plan, opts ...Option) (*Session, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if b == nil {
		return nil, errors.New("executor: Open: no backend")
	}
	if err := checkPlan(p); err != nil {
		return nil, err
	}
	if c, ok := b.(device.BodyChecker); ok {
		if err := device.CheckBodies(c, p.Graph); err != nil {
			return nil, fmt.Errorf("executor: the backend cannot run these ops in a loop or branch: %w", err)
		}
	}
	if err := checkFaultOp(p, cfg.faults); err != nil { // faults.go
		return nil, err
	}
	var d device.Session
	var err error
	if cfg.lend != nil {
		d, err = cfg.lend.open(ctx, p.Graph) // shapes_memory.go: memory admitted with its holder
	} else {
		d, err = openDevice(ctx, b, p)
	}
	if err != nil {
		return nil, err
	}
	if err := join(ctx, d, cfg.world); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	s, err := build(ctx, d, p, cfg)
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	s.b = b
	s.early = launchEarly(b, d, p) // early.go
	return s, nil
}

// openDevice opens the device session of p on b, once admission control
// finds the memory it needs free.
func openDevice(ctx context.Context, b device.Backend, p *planner.Plan) (device.Session, error) {
	isHost := func(memory int) bool { return memory == device.HostMemory }
	if err := checkMemory(b, p, isHost); err != nil { // admission.go
		return nil, err
	}
	// Host buffers are made while the devices' memory is asked for (a
	// CUDA context's creation: 90 ms on the H100).
	release := func() {}
	if hp, ok := b.(device.HostPreparer); ok {
		release = hp.PrepareHost(p.Graph)
	}
	if err := checkMemory(b, p, func(memory int) bool { return !isHost(memory) }); err != nil {
		release()
		return nil, err
	}
	d, err := b.Open(ctx, p.Graph)
	if err != nil {
		release()
		return nil, fmt.Errorf("executor: open a session on the backend: %w", err)
	}
	if d == nil {
		return nil, fmt.Errorf("executor: backend %T opened no session and reported no error", b)
	}
	return d, nil
}

// build makes the session's parts on d, its streams and events, and
// hands the backend the plan's bodies and arenas.
func build(ctx context.Context, d device.Session, p *planner.Plan, cfg config) (*Session, error) {
	faults, err := newInjector(d, p, cfg.faults) // faults.go
	if err != nil {
		return nil, err
	}
	s := &Session{d: d, p: p, beside: beside{d: d, bufs: p.Graph.Buffers}, made: made{d: d}}
	s.sub = submitter{d: d, p: p, closed: &s.closed, faults: faults}
	if cfg.submitTiming {
		s.sub.timer = newSubmitTimer(d)
	}
	if s.time, err = newTiming(d, cfg); err != nil { // profile.go
		return nil, fmt.Errorf("executor: timing: %w", err)
	}
	s.auto = autoCapture{after: cfg.auto, d: d, p: p, injected: faults != nil}
	if err := checkController(d, p); err != nil { // control.go
		return nil, err
	}
	if err := s.made.plan(p); err != nil {
		return nil, err
	}
	if err := s.made.setBodies(p); err != nil { // control.go
		return nil, err
	}
	if cfg.lend != nil {
		s.arenas = cfg.lend.arenas // the holder's (shapes_memory.go)
	} else if s.arenas, err = useArenas(d, p, cfg.temporaries); err != nil { // arena.go
		return nil, err
	}
	return s, ctx.Err()
}

// checkPlan makes sure every step names a stream, event and op that
// exist, so that the submission loop cannot index out of range.
func checkPlan(p *planner.Plan) error {
	if p == nil || p.Graph == nil {
		return errors.New("executor: no plan, or a plan without a graph")
	}
	ops, streams := int32(len(p.Graph.Ops)), int32(len(p.Streams))
	for i, st := range p.Steps {
		bad := st.Stream < 0 || st.Stream >= streams
		switch st.Kind {
		case planner.Run:
			bad = bad || st.Op < 0 || st.Op >= ops || p.Graph.Ops[st.Op] == nil
		case planner.Record, planner.Wait:
			bad = bad || st.Event < 0 || int(st.Event) >= p.Events
		default:
			bad = true
		}
		if bad {
			return fmt.Errorf("executor: plan step %d (%s stream %d op %d event %d) is malformed; make plans with planner.New",
				i, st.Kind, st.Stream, st.Op, st.Event)
		}
	}
	return nil
}

// Run submits the plan's steps in order, then waits for them. An op's
// failure is a *dag.OpError naming it; the ops after it are skipped. When
// ctx ends, submission stops, the work in flight is abandoned and the
// error wraps ctx.Err(). Either way the backend is idle when Run returns,
// and the session can run again or close.
func (s *Session) Run(ctx context.Context) (err error) {
	ctx, end, err := beginRun(ctx, s)
	if err != nil {
		return err
	}
	defer end(&err)
	if replayed, err := s.auto.run(ctx, s.capture, s.time.addReplays); replayed { // autocapture.go
		return err
	}
	return runEager(ctx, s, nil)
}

// beginRun starts a run of s: the session's flight (Close from another
// goroutine waits for it), its spans reset. end ends the flight.
func beginRun(ctx context.Context, s *Session) (_ context.Context, end func(*error), err error) {
	if s.unusable() { // zero.go
		return nil, nil, fmt.Errorf("executor: Run: session is %w", device.ErrClosed)
	}
	ctx, end, err = s.flight.begin(ctx, &s.closed, "Run") // close.go: Close from another goroutine
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		end(&err)
		return nil, nil, fmt.Errorf("executor: run not started: %w", err)
	}
	s.time.spans = s.time.spans[:0]
	return ctx, end, nil
}

// runEager submits the plan's steps and waits for them; whileRunning,
// when not nil, runs between the two, while the device runs them, and
// its error joins the run's.
func runEager(ctx context.Context, s *Session, whileRunning func() error) error {
	s.sub.faults.startRun()
	if err := s.sub.submit(ctx, s.auto.ops(), "run"); err != nil {
		s.auto.eagerFailed()
		return s.drain(ctx, err)
	}
	var werr error
	if whileRunning != nil {
		werr = whileRunning()
	}
	err := syncError(ctx, s.beside.sync(ctx))
	s.time.collect()
	if err != nil {
		s.auto.eagerFailed()
		if werr != nil {
			err = errors.Join(err, werr)
		}
		return err
	}
	if werr == nil {
		s.auto.noteRuns(1, false)
	}
	return werr
}

// drain ends a run whose submission failed with err: it waits for what
// was submitted (abandoning it, if ctx has ended) so that nothing is left
// running, and adds any other error the wait reports.
func (s *Session) drain(ctx context.Context, err error) error {
	serr := s.beside.sync(ctx)
	s.time.collect()
	if serr != nil && !errors.Is(serr, ctx.Err()) {
		return errors.Join(err, syncError(ctx, serr))
	}
	return err
}

// syncError passes op errors through and says where the others come from.
func syncError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*dag.OpError](err); ok {
		return err
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("executor: run abandoned: %w", err)
	}
	return fmt.Errorf("executor: sync: %w", err)
}

// Read returns the contents of persistent buffer b after the last Run.
func (s *Session) Read(b *dag.Buffer) ([]byte, error) {
	if err := s.checkBuffer("Read", b); err != nil {
		return nil, err
	}
	data, err := s.d.Read(b)
	if err != nil {
		return nil, fmt.Errorf("executor: read %q: %w", b.Name, err)
	}
	return data, nil
}

// Write replaces the contents of persistent buffer b with data (b's size)
// before the next run or replay: a new input batch. The backend must
// implement Writer. While replays launched (Graph.Launch) are not yet
// synchronised, Write takes a host buffer they do not use, at once (the
// backend must implement HostWriter): the next batch is written while the
// device works on this one. A buffer they use, or device memory, waits
// for Sync.
func (s *Session) Write(b *dag.Buffer, data []byte) error {
	if err := s.checkBuffer("Write", b); err != nil {
		return err
	}
	if s.beside.busy != nil {
		return s.beside.write(b, data) // beside.go
	}
	w, ok := s.d.(device.Writer)
	if !ok {
		return fmt.Errorf("executor: Write: device session %T cannot write buffers", s.d)
	}
	if err := w.Write(b, data); err != nil {
		return fmt.Errorf("executor: write %q: %w", b.Name, err)
	}
	return nil
}

// checkBuffer makes sure b is a persistent buffer of the plan's graph.
func (s *Session) checkBuffer(verb string, b *dag.Buffer) error {
	switch {
	case s.unusable(): // zero.go
		return fmt.Errorf("executor: %s: session is %w", verb, device.ErrClosed)
	case b == nil:
		return fmt.Errorf("executor: %s: no buffer", verb)
	case b.ID < 0 || b.ID >= len(s.p.Graph.Buffers) || s.p.Graph.Buffers[b.ID] != b:
		return fmt.Errorf("executor: %s: buffer %q is not one of the plan's graph", verb, b.Name)
	case b.Temporary:
		return fmt.Errorf("executor: %s: buffer %q is temporary; it lives only inside a run (copy it to a persistent buffer to keep it)", verb, b.Name)
	}
	return nil
}

// Device returns the backend's session under s, for what only a backend
// offers (its resource counts, say). Calls on it bypass s: use them
// between runs.
func (s *Session) Device() device.Session { return s.d }

// Unfused lists the fused ops (a gemm with an epilogue) that the backend
// runs as a product followed by the builtin kernels of the epilogue,
// because its library refused the epilogue (device.Unfuser); nil when it
// runs every epilogue fused, or cannot say.
func (s *Session) Unfused() []device.Unfused {
	if u, ok := s.b.(device.Unfuser); ok && s.d != nil {
		return u.Unfused(s.d)
	}
	return nil
}

// Spans returns when each op of the last Run ran, in the order the ops
// finished, if the session was opened WithTiming on a backend that
// implements Timer; otherwise nil.
func (s *Session) Spans() []Span {
	if s.time.timer == nil {
		return nil
	}
	return slices.Clone(s.time.spans)
}

// Close releases the session's graphs and its device session: everything
// the session made on the backend, and only that. It may be called from
// any goroutine at any time: it ends the run, capture or replay in flight
// and waits for it, and a second Close waits for the first to finish.
func (s *Session) Close() error {
	if s.d == nil { // zero.go: a Session not made by Open holds nothing
		return nil
	}
	var err error
	s.closing.Do(func() {
		s.closed.Store(true)
		s.flight.stop() // close.go: end a run in flight and wait for it
		_, end := s.flight.hold(context.Background())
		defer end(new(error))
		var errs []error
		for len(s.graphs) > 0 {
			errs = append(errs, s.graphs[0].closeHeld())
		}
		if cerr := s.d.Close(); cerr != nil {
			errs = append(errs, fmt.Errorf("executor: close the device session: %w", cerr))
		}
		err = errors.Join(errs...)
	})
	return err
}

// Execute opens p on b, runs it once, and returns the contents of every
// persistent buffer of its graph; it closes the session whatever happens,
// and leaves b open.
func Execute(ctx context.Context, b device.Backend, p *planner.Plan) (Results, error) {
	return execute(ctx, b, p)
}

// execute is Execute with the session's options.
func execute(ctx context.Context, b device.Backend, p *planner.Plan, opts ...Option) (out Results, err error) {
	s, err := Open(ctx, b, p, opts...)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	if err := s.Run(ctx); err != nil {
		return nil, err
	}
	out = make(map[*dag.Buffer][]byte)
	for _, buf := range p.Graph.Buffers {
		if buf.Temporary {
			continue
		}
		data, err := s.Read(buf)
		if err != nil {
			return nil, err
		}
		out[buf] = data
	}
	return out, nil
}

func streamName(st planner.Stream) string {
	if st.Name != "" {
		return st.Name
	}
	return fmt.Sprintf("%d", st.ID)
}
