package cpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/emirpasic/gods/queues/priorityqueue"
)

// Option configures a Backend and the sessions it opens.
type Option func(*config)

type config struct {
	workers    int
	delaySeed  uint64
	delayLimit time.Duration
}

// Workers sets how many worker goroutines the streams share; n < 1 means
// runtime.GOMAXPROCS(0).
func Workers(n int) Option { return func(c *config) { c.workers = n } }

// Delays pauses for a random time in [0, max) before every op, drawn from
// seed, the op and the run, so the same seed gives the same pauses. Tests
// use it to shake the timing of a plan; max <= 0 turns it off.
func Delays(seed int64, max time.Duration) Option {
	return func(c *config) { c.delaySeed, c.delayLimit = uint64(seed), max }
}

// errClosed ends the work of a session that is being closed.
var errClosed = fmt.Errorf("cpu: session %w", device.ErrClosed)

// Backend runs plans on the CPU: it opens sessions (device.Backend). It
// holds nothing of its own but its options and the sessions open on it;
// each session has its own memory, streams, events, graphs and worker
// goroutines, so sessions run side by side, each from its own goroutine.
// The zero value is a backend with the default options.
type Backend struct {
	cfg config

	mu       sync.Mutex
	sessions map[*Session]struct{}
	closed   bool

	ext eventRegistry // the callers' events (external.go)
}

// New returns a Backend with the given options; it starts nothing until
// Open.
func New(opts ...Option) *Backend {
	b := &Backend{}
	for _, o := range opts {
		o(&b.cfg)
	}
	return b
}

var _ device.Backend = (*Backend)(nil)

// Open starts a *Session for g: it checks that every op can run on the
// CPU (kernels from the builtin library only), makes the persistent
// buffers with their initial contents and starts the session's workers.
func (b *Backend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := b.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenSession is Open returning the *Session itself.
func (b *Backend) OpenSession(ctx context.Context, g *dag.Graph) (*Session, error) {
	if b == nil {
		return nil, errors.New("cpu: Open: no backend; make one with cpu.New")
	}
	if g == nil {
		return nil, errors.New("cpu: Open: no graph")
	}
	return b.open(ctx, g, nil, nil)
}

// open opens a session for g whose buffers are lent[i] where that is not
// nil (OpenShared: another session's memory), else made here, and whose
// temporaries are in a, when a is not nil.
func (b *Backend) open(ctx context.Context, g *dag.Graph, lent [][]byte, a *arenas) (*Session, error) {
	kernels, err := prepare(g)
	if err != nil {
		return nil, err
	}
	if err := checkPersistent(g, lent); err != nil {
		return nil, err
	}
	mem := make([][]byte, len(g.Buffers))
	for i, buf := range g.Buffers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: Open: %w", err)
		}
		switch {
		case i < len(lent) && lent[i] != nil:
			mem[i] = lent[i]
		case !buf.Temporary:
			if mem[i], err = makeBuffer(buf); err != nil {
				return nil, fmt.Errorf("cpu: Open: %w", err)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("cpu: Open: the backend is %w; make another with cpu.New", device.ErrClosed)
	}
	cfg := b.cfg
	if cfg.workers < 1 {
		cfg.workers = runtime.GOMAXPROCS(0)
	}
	s := newSession(b, cfg, g, mem, kernels)
	s.memory.arenas = a
	s.sched.workers.Add(cfg.workers)
	for range cfg.workers {
		go s.sched.work(&worker{})
	}
	if b.sessions == nil {
		b.sessions = map[*Session]struct{}{}
	}
	b.sessions[s] = struct{}{}
	return s, nil
}

// Sessions is the number of sessions open on b.
func (b *Backend) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// Close closes every session still open on b (skipping their work left)
// and makes b refuse further Opens. Closing twice does nothing.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	open := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range open {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

func (b *Backend) forget(s *Session) {
	b.mu.Lock()
	delete(b.sessions, s)
	b.mu.Unlock()
}

// Session is one graph's runs on the CPU (device.Session, with
// device.Timer, device.Capturer and device.Writer): follow the protocol of
// device.Session: NewStream and NewEvent, then Run, Record and Wait calls
// ended by Sync, as often as wanted, and Close.
//
// All methods take one mutex, the scheduler's; workers hold it only to
// move between ops. Its work is done by its parts, one per job, each
// given the parts it uses when the session opens; none holds the Session.
type Session struct {
	backend *Backend

	sched  scheduler   // streams, events, workers and the run's state, under the lock
	memory memory      // the buffers, arenas and kernels
	timer  timer       // the ops' spans
	capt   capturer    // captured graphs
	ctl    controller  // loops and branches
	coll   collectives // the world of the session's collectives
}

// timer is what a session keeps of its ops' times, under the
// scheduler's lock.
type timer struct {
	timing   bool
	origin   time.Time
	launches int64 // LaunchGraph calls since the session opened: the replays' numbers
	spans    []span
	spare    []span // the other half of a double buffer, so Spans can call f without the lock
}

var (
	_ device.Session  = (*Session)(nil)
	_ device.Timer    = (*Session)(nil)
	_ device.Capturer = (*Session)(nil)
	_ device.Writer   = (*Session)(nil)

	_ device.ReplayTimer = (*Session)(nil)
	_ device.OpCounter   = (*Session)(nil)
)

// newSession returns a session of b for g, with its buffers mem and its
// kernels, and each of its parts given the parts it uses.
func newSession(b *Backend, cfg config, g *dag.Graph, mem [][]byte, kernels []kernelFunc) *Session {
	s := &Session{backend: b}
	s.memory = memory{g: g, mem: mem, kernels: kernels}
	sc := &s.sched
	sc.cfg, sc.ext, sc.open = cfg, &b.ext, true
	sc.memory, sc.timer, sc.capt, sc.ctl, sc.coll = &s.memory, &s.timer, &s.capt, &s.ctl, &s.coll
	sc.wake.L = &sc.mu
	sc.ready = priorityqueue.NewWith(byPriority)
	sc.runCtx, sc.cancelRun = context.WithCancel(context.Background())
	s.capt.memory, s.capt.sched = &s.memory, sc
	s.ctl.memory, s.ctl.sched = &s.memory, sc
	return s
}

// OpsDone is how many ops the session has run since it opened, eagerly or
// in replays: a program's progress display reads it, from any goroutine,
// while a long run is in flight.
func (b *Session) OpsDone() int64 { return b.sched.opsDone.Load() }

// span is the time one op ran, in which replay (-1 for an eager op).
type span struct {
	op, stream int32
	replay     int64
	start, end time.Duration
}

// NewStream creates the next stream. The CPU stands in for every device,
// so device only needs to be a valid number.
func (b *Session) NewStream(device int, priority dag.Priority) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if device < 0 {
		return fmt.Errorf("cpu: stream on device %d: devices are numbered from 0", device)
	}
	b.sched.streams = append(b.sched.streams, &stream{id: int32(len(b.sched.streams)), priority: int(priority)})
	return nil
}

// NewEvent creates the next event.
func (b *Session) NewEvent() error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	b.sched.events = append(b.sched.events, event{})
	return nil
}

// Record enqueues a record of event on stream: the event is reached once
// everything enqueued on stream before it is done.
func (b *Session) Record(stream, event int) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.checkStep(stream, event); err != nil {
		return err
	}
	if b.capt.capturing != nil {
		b.capt.addCaptured(stream, instr{kind: record, event: int32(event)})
		return nil
	}
	ev := &b.sched.events[event]
	ev.recorded++
	b.sched.enqueue(b.sched.streams[stream], instr{kind: record, event: int32(event), gen: ev.recorded})
	return nil
}

// Wait makes stream wait, before the work enqueued on it later, for the
// last record of event enqueued so far; an event never recorded is no
// wait at all (as in CUDA).
func (b *Session) Wait(stream, event int) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.checkStep(stream, event); err != nil {
		return err
	}
	if b.capt.capturing != nil {
		b.capt.addCaptured(stream, instr{kind: wait, event: int32(event)})
		return nil
	}
	b.sched.enqueue(b.sched.streams[stream], instr{kind: wait, event: int32(event), gen: b.sched.events[event].recorded})
	return nil
}

// Run enqueues op on stream. It may start at once.
func (b *Session) Run(stream int, op *dag.Op) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.checkStep(stream, -1); err != nil {
		return err
	}
	if op == nil || op.ID < 0 || op.ID >= len(b.memory.g.Ops) {
		return errors.New("cpu: Run: the op is not one of the opened graph's")
	}
	if b.memory.g.Ops[op.ID] != op {
		if err := b.capt.checkVariant(op); err != nil {
			return err
		}
	}
	if b.capt.capturing != nil {
		b.capt.addCaptured(stream, instr{kind: run, op: op})
		return nil
	}
	b.sched.enqueue(b.sched.streams[stream], instr{kind: run, op: op})
	return nil
}

// Sync waits until everything enqueued is done and returns the first error
// of the run: an op's *dag.OpError (the ops after it were skipped), or
// ctx.Err() when ctx ended first, in which case the work left is skipped
// and the running kernels and host steps are told to stop. Either way the
// backend is idle when Sync returns and ready for the next run; the
// temporaries of a failed run are dropped.
func (b *Session) Sync(ctx context.Context) error {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	if b.sched.pending > 0 {
		// Waiters share one channel: a second Sync from another goroutine
		// must not strand the first.
		if b.sched.drained == nil {
			b.sched.drained = make(chan struct{})
		}
		done := b.sched.drained
		b.sched.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			b.sched.mu.Lock()
			b.sched.abort(ctx.Err())
			b.sched.mu.Unlock()
			<-done
		}
		b.sched.mu.Lock()
		if !b.sched.open || b.memory.g == nil {
			return errClosedInFlight // faults.go
		}
	}
	err := b.sched.err
	if b.sched.aborted {
		b.sched.restart()
	}
	b.sched.err, b.sched.started = nil, false
	return err
}

// Read returns a copy of the contents of persistent buffer buf; call it
// after Sync.
func (b *Session) Read(buf *dag.Buffer) ([]byte, error) {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return nil, err
	}
	switch {
	case buf == nil || buf.ID < 0 || buf.ID >= len(b.memory.g.Buffers) || b.memory.g.Buffers[buf.ID] != buf:
		return nil, fmt.Errorf("cpu: Read: buffer %v is not one of the opened graph's", buf)
	case buf.Temporary:
		return nil, fmt.Errorf("cpu: Read: buffer %q is temporary; it lives only inside a run", buf.Name)
	case b.sched.pending > 0:
		return nil, fmt.Errorf("cpu: Read: buffer %q: %w; call Sync first", buf.Name, device.ErrBusy)
	}
	return slices.Clone(b.memory.mem[buf.ID]), nil
}

// Close stops the workers, skipping any work left, and releases the
// session's memory, streams, events and graphs. Closing twice does
// nothing.
func (b *Session) Close() error {
	b.sched.mu.Lock()
	if !b.sched.open || b.sched.closing {
		b.sched.mu.Unlock()
		return nil
	}
	b.sched.closing = true
	b.sched.abort(errClosed)
	b.sched.wake.Broadcast()
	b.sched.mu.Unlock()

	b.sched.workers.Wait()

	b.sched.mu.Lock()
	b.sched.cancelRun()
	b.sched.wakeSync() // faults.go: a Sync in flight returns
	b.memory.g, b.memory.mem, b.memory.kernels, b.sched.ready = nil, nil, nil, nil
	b.sched.streams, b.sched.events, b.timer.spans, b.timer.spare = nil, nil, nil, nil
	b.capt.capturing, b.capt.graphs, b.capt.forkEvents, b.capt.joinEvents = nil, nil, nil, nil
	b.ctl.controls, b.ctl.ctlEvents, b.ctl.bodyStreams, b.ctl.failBody = nil, nil, nil, nil
	b.sched.blocked, b.sched.pending, b.sched.drained = 0, 0, nil
	b.sched.open = false
	b.sched.mu.Unlock()
	if b.backend != nil {
		b.backend.forget(b)
	}
	return nil
}

// SetTiming turns the timing of ops on or off. With it off, workers read
// no clock at all.
func (b *Session) SetTiming(on bool) {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	b.timer.timing = on
}

// Spans calls f with each op's start and end, measured from the start of
// its run (the first enqueue after a Sync), for the ops run since the
// last call. Call it after Sync.
func (b *Session) Spans(f func(op, stream int, start, end time.Duration)) error {
	return b.ReplaySpans(func(_, op, stream int, start, end time.Duration) { f(op, stream, start, end) })
}

// TimesReplays reports whether ReplaySpans times the ops of graph replays
// launched back to back, each replay apart: whenever timing is on.
func (b *Session) TimesReplays() bool {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	return b.timer.timing
}

// ReplaySpans is Spans with each span's replay: the session's launch
// number of the graph replay the op ran in (LaunchGraph calls since the
// session opened, from 0), or -1 for an op of an eager run.
func (b *Session) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	b.sched.mu.Lock()
	if b.sched.pending > 0 {
		b.sched.mu.Unlock()
		return fmt.Errorf("cpu: Spans: %w; call Sync first", device.ErrBusy)
	}
	spans := b.timer.spans
	b.timer.spans, b.timer.spare = b.timer.spare[:0], nil
	b.sched.mu.Unlock()

	for _, s := range spans {
		f(int(s.replay), int(s.op), int(s.stream), s.start, s.end)
	}

	b.sched.mu.Lock()
	if b.timer.spare == nil {
		b.timer.spare = spans[:0]
	}
	b.sched.mu.Unlock()
	return nil
}

// usable reports why the backend cannot take calls, if it cannot.
func (sc *scheduler) usable() error {
	if !sc.open || sc.closing {
		return fmt.Errorf("cpu: the session is %w", device.ErrClosed)
	}
	return nil
}

// checkStep checks the stream and, unless it is -1, the event of a step.
func (sc *scheduler) checkStep(stream, event int) error {
	if err := sc.usable(); err != nil {
		return err
	}
	if stream < 0 || stream >= len(sc.streams) {
		return fmt.Errorf("cpu: stream %d does not exist; %d were created", stream, len(sc.streams))
	}
	if event != -1 && (event < 0 || event >= len(sc.events)) {
		return fmt.Errorf("cpu: event %d does not exist; %d were created", event, len(sc.events))
	}
	return nil
}

// abort ends the current run with err, unless it has ended already: the
// work left is skipped, blocked streams are released and running kernels
// and host steps are told to stop.
func (sc *scheduler) abort(err error) {
	if sc.err == nil {
		sc.err = err
	}
	if sc.aborted {
		return
	}
	sc.aborted = true
	sc.stop.Store(true)
	sc.cancelRun()
	for _, s := range sc.streams {
		if s.state == blocked {
			sc.blocked--
			s.state = idle
			sc.resume(s)
		}
	}
}

// restart readies an idle backend for the next run after an aborted one:
// temporaries are dropped (their Frees were skipped) and host steps get a
// fresh context.
func (sc *scheduler) restart() {
	for i, buf := range sc.memory.g.Buffers {
		if buf.Temporary && sc.memory.arenas == nil { // arena.go: arenas stay bound
			if sc.memory.mem[i] != nil {
				sc.memory.countTemporary(buf, -1)
			}
			sc.memory.mem[i] = nil
		}
	}
	sc.aborted = false
	sc.stop.Store(false)
	sc.runCtx, sc.cancelRun = context.WithCancel(context.Background())
}
