package cpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
	kernels, err := prepare(g)
	if err != nil {
		return nil, err
	}
	if err := checkPersistent(g); err != nil {
		return nil, err
	}
	mem := make([][]byte, len(g.Buffers))
	for i, buf := range g.Buffers {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: Open: %w", err)
		}
		if !buf.Temporary {
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
	s := &Session{backend: b, cfg: cfg, g: g, mem: mem, kernels: kernels, open: true}
	s.wake.L = &s.mu
	s.ready = priorityqueue.NewWith(byPriority)
	s.runCtx, s.cancelRun = context.WithCancel(context.Background())
	s.workers.Add(cfg.workers)
	for range cfg.workers {
		go s.work(&worker{})
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
// All methods take one mutex; workers hold it only to move between ops.
type Session struct {
	backend *Backend
	cfg     config

	mu      sync.Mutex
	wake    sync.Cond            // a stream became ready, or the session is closing
	ready   *priorityqueue.Queue // *stream values whose head op waits for a worker
	idle    int                  // workers waiting on wake
	seq     uint64               // orders ready streams of equal priority: first come, first served
	streams []*stream
	events  []event
	blocked int // streams whose head is a wait on an event not yet reached

	pending int           // instructions enqueued and not yet done
	drained chan struct{} // closed when pending drops to 0 while a Sync waits; shared by every waiter
	err     error         // the first error of the current run
	aborted bool          // the current run failed or was cancelled: skip what is left
	started bool          // work was enqueued since the last Sync
	epoch   uint64        // runs started, for the delay draws
	closing bool
	open    bool

	// stop tells running kernels (spin) to return at once. It mirrors
	// aborted, but kernels read it without the mutex.
	stop      atomic.Bool
	opsDone   atomic.Int64    // ops run since the session opened (OpsDone)
	runCtx    context.Context // passed to host steps; cancelled on abort
	cancelRun context.CancelFunc

	timing   bool
	origin   time.Time
	launches int64 // LaunchGraph calls since the session opened: the replays' numbers
	spans    []span
	spare    []span // the other half of a double buffer, so Spans can call f without the lock

	g      *dag.Graph
	mem    [][]byte // by buffer ID; nil for a temporary that is not allocated
	arenas *arenas  // arena.go: nil unless the temporaries live in arenas
	// live and high are the bytes of temporaries allocated now and the
	// most allocated at once, by memory (arena.go: MemoryHighWater).
	live, high map[int]int64
	kernels    []kernelFunc
	workers    sync.WaitGroup

	// The world of the session's collectives (collective.go): set by
	// Join, else a world of one rank on first use.
	comm   device.Collectives
	joined bool

	// Graph capture (capture.go).
	capturing  *graph   // the capture in progress, if any
	graphs     []*graph // by number; nil once destroyed
	forkEvents []int32  // by stream: the event a capture on it forks with
	joinEvents []int32  // by stream: the event it joins a capture with

	// Loops and branches (control.go).
	controls    map[int]*control // by the op's index
	ctlEvents   []event          // the controls' entry and exit events, numbered -1, -2, ...
	bodyStreams []bool           // by stream: it serves a body
	failBody    *bodyFault       // FailInBody's, if any
}

var (
	_ device.Session  = (*Session)(nil)
	_ device.Timer    = (*Session)(nil)
	_ device.Capturer = (*Session)(nil)
	_ device.Writer   = (*Session)(nil)

	_ device.ReplayTimer = (*Session)(nil)
	_ device.OpCounter   = (*Session)(nil)
)

// OpsDone is how many ops the session has run since it opened, eagerly or
// in replays: a program's progress display reads it, from any goroutine,
// while a long run is in flight.
func (b *Session) OpsDone() int64 { return b.opsDone.Load() }

// span is the time one op ran, in which replay (-1 for an eager op).
type span struct {
	op, stream int32
	replay     int64
	start, end time.Duration
}

// NewStream creates the next stream. The CPU stands in for every device,
// so device only needs to be a valid number.
func (b *Session) NewStream(device int, priority dag.Priority) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if device < 0 {
		return fmt.Errorf("cpu: stream on device %d: devices are numbered from 0", device)
	}
	b.streams = append(b.streams, &stream{id: int32(len(b.streams)), priority: int(priority)})
	return nil
}

// NewEvent creates the next event.
func (b *Session) NewEvent() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	b.events = append(b.events, event{})
	return nil
}

// Record enqueues a record of event on stream: the event is reached once
// everything enqueued on stream before it is done.
func (b *Session) Record(stream, event int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(stream, event); err != nil {
		return err
	}
	if b.capturing != nil {
		b.addCaptured(stream, instr{kind: record, event: int32(event)})
		return nil
	}
	ev := &b.events[event]
	ev.recorded++
	b.enqueue(b.streams[stream], instr{kind: record, event: int32(event), gen: ev.recorded})
	return nil
}

// Wait makes stream wait, before the work enqueued on it later, for the
// last record of event enqueued so far; an event never recorded is no
// wait at all (as in CUDA).
func (b *Session) Wait(stream, event int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(stream, event); err != nil {
		return err
	}
	if b.capturing != nil {
		b.addCaptured(stream, instr{kind: wait, event: int32(event)})
		return nil
	}
	b.enqueue(b.streams[stream], instr{kind: wait, event: int32(event), gen: b.events[event].recorded})
	return nil
}

// Run enqueues op on stream. It may start at once.
func (b *Session) Run(stream int, op *dag.Op) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkStep(stream, -1); err != nil {
		return err
	}
	if op == nil || op.ID < 0 || op.ID >= len(b.g.Ops) {
		return errors.New("cpu: Run: the op is not one of the opened graph's")
	}
	if b.g.Ops[op.ID] != op {
		if err := b.checkVariant(op); err != nil {
			return err
		}
	}
	if b.capturing != nil {
		b.addCaptured(stream, instr{kind: run, op: op})
		return nil
	}
	b.enqueue(b.streams[stream], instr{kind: run, op: op})
	return nil
}

// Sync waits until everything enqueued is done and returns the first error
// of the run: an op's *dag.OpError (the ops after it were skipped), or
// ctx.Err() when ctx ended first, in which case the work left is skipped
// and the running kernels and host steps are told to stop. Either way the
// backend is idle when Sync returns and ready for the next run; the
// temporaries of a failed run are dropped.
func (b *Session) Sync(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if b.pending > 0 {
		// Waiters share one channel: a second Sync from another goroutine
		// must not strand the first.
		if b.drained == nil {
			b.drained = make(chan struct{})
		}
		done := b.drained
		b.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			b.mu.Lock()
			b.abort(ctx.Err())
			b.mu.Unlock()
			<-done
		}
		b.mu.Lock()
		if !b.open || b.g == nil {
			return errClosedInFlight // faults.go
		}
	}
	err := b.err
	if b.aborted {
		b.restart()
	}
	b.err, b.started = nil, false
	return err
}

// Read returns a copy of the contents of persistent buffer buf; call it
// after Sync.
func (b *Session) Read(buf *dag.Buffer) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return nil, err
	}
	switch {
	case buf == nil || buf.ID < 0 || buf.ID >= len(b.g.Buffers) || b.g.Buffers[buf.ID] != buf:
		return nil, fmt.Errorf("cpu: Read: buffer %v is not one of the opened graph's", buf)
	case buf.Temporary:
		return nil, fmt.Errorf("cpu: Read: buffer %q is temporary; it lives only inside a run", buf.Name)
	case b.pending > 0:
		return nil, fmt.Errorf("cpu: Read: buffer %q: %w; call Sync first", buf.Name, device.ErrBusy)
	}
	return slices.Clone(b.mem[buf.ID]), nil
}

// Close stops the workers, skipping any work left, and releases the
// session's memory, streams, events and graphs. Closing twice does
// nothing.
func (b *Session) Close() error {
	b.mu.Lock()
	if !b.open || b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	b.abort(errClosed)
	b.wake.Broadcast()
	b.mu.Unlock()

	b.workers.Wait()

	b.mu.Lock()
	b.cancelRun()
	b.wakeSync() // faults.go: a Sync in flight returns
	b.g, b.mem, b.kernels, b.ready = nil, nil, nil, nil
	b.streams, b.events, b.spans, b.spare = nil, nil, nil, nil
	b.capturing, b.graphs, b.forkEvents, b.joinEvents = nil, nil, nil, nil
	b.controls, b.ctlEvents, b.bodyStreams, b.failBody = nil, nil, nil, nil
	b.blocked, b.pending, b.drained = 0, 0, nil
	b.open = false
	b.mu.Unlock()
	if b.backend != nil {
		b.backend.forget(b)
	}
	return nil
}

// SetTiming turns the timing of ops on or off. With it off, workers read
// no clock at all.
func (b *Session) SetTiming(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timing = on
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
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timing
}

// ReplaySpans is Spans with each span's replay: the session's launch
// number of the graph replay the op ran in (LaunchGraph calls since the
// session opened, from 0), or -1 for an op of an eager run.
func (b *Session) ReplaySpans(f func(replay, op, stream int, start, end time.Duration)) error {
	b.mu.Lock()
	if b.pending > 0 {
		b.mu.Unlock()
		return fmt.Errorf("cpu: Spans: %w; call Sync first", device.ErrBusy)
	}
	spans := b.spans
	b.spans, b.spare = b.spare[:0], nil
	b.mu.Unlock()

	for _, s := range spans {
		f(int(s.replay), int(s.op), int(s.stream), s.start, s.end)
	}

	b.mu.Lock()
	if b.spare == nil {
		b.spare = spans[:0]
	}
	b.mu.Unlock()
	return nil
}

// usable reports why the backend cannot take calls, if it cannot.
func (b *Session) usable() error {
	if !b.open || b.closing {
		return fmt.Errorf("cpu: the session is %w", device.ErrClosed)
	}
	return nil
}

// checkStep checks the stream and, unless it is -1, the event of a step.
func (b *Session) checkStep(stream, event int) error {
	if err := b.usable(); err != nil {
		return err
	}
	if stream < 0 || stream >= len(b.streams) {
		return fmt.Errorf("cpu: stream %d does not exist; %d were created", stream, len(b.streams))
	}
	if event != -1 && (event < 0 || event >= len(b.events)) {
		return fmt.Errorf("cpu: event %d does not exist; %d were created", event, len(b.events))
	}
	return nil
}

// abort ends the current run with err, unless it has ended already: the
// work left is skipped, blocked streams are released and running kernels
// and host steps are told to stop.
func (b *Session) abort(err error) {
	if b.err == nil {
		b.err = err
	}
	if b.aborted {
		return
	}
	b.aborted = true
	b.stop.Store(true)
	b.cancelRun()
	for _, s := range b.streams {
		if s.state == blocked {
			b.blocked--
			s.state = idle
			b.resume(s)
		}
	}
}

// restart readies an idle backend for the next run after an aborted one:
// temporaries are dropped (their Frees were skipped) and host steps get a
// fresh context.
func (b *Session) restart() {
	for i, buf := range b.g.Buffers {
		if buf.Temporary && b.arenas == nil { // arena.go: arenas stay bound
			if b.mem[i] != nil {
				b.countTemporary(buf, -1)
			}
			b.mem[i] = nil
		}
	}
	b.aborted = false
	b.stop.Store(false)
	b.runCtx, b.cancelRun = context.WithCancel(context.Background())
}
