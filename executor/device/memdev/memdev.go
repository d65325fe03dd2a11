// Package memdev is the smallest complete dagrun backend: device memory is
// byte slices and every call does its work at once, on the caller's
// goroutine, in the order the calls come. It registers as "mem" (never
// chosen by "auto") and is both a test double and the worked example for
// whoever writes a backend.
//
// Doing the work at once is correct because the executor submits a plan in
// an order that respects every stream's order and every wait (a wait comes
// after its record): running each step as it is submitted is one of the
// schedules the plan allows. So streams and events are only counted and
// checked here, and Sync only reports the first error since the last one.
//
// The Backend offers MemorySharer (persistent buffers only: it has no
// arenas). The Session offers Capturer (a capture is the list of what was
// submitted, and a replay submits it again), Controller (loops and
// branches run their bodies' steps in order), Writer, Joiner (collectives
// through the world's device.Collectives), Delayer and Failer. It runs
// allocs, frees, copies, fills, 2-D memsets, host steps, tasks (those
// that run on the CPU, with the host's stream), loops, branches, collectives and the f32 builtins empty, spin,
// iota, scale, axpy, add, reduce_sum and set_flag; Open refuses any other
// op with an error naming it and matching errors.ErrUnsupported.
package memdev

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

func init() {
	device.Register("mem", 0, func(device.Config) (device.Backend, error) { return New(), nil })
}

var (
	_ device.Backend      = (*Backend)(nil)
	_ device.MemorySharer = (*Backend)(nil)
	_ device.Session      = (*Session)(nil)
	_ device.Capturer     = (*Session)(nil)
	_ device.Controller   = (*Session)(nil)
	_ device.Writer       = (*Session)(nil)
	_ device.Joiner       = (*Session)(nil)
	_ device.Delayer      = (*Session)(nil)
	_ device.Failer       = (*Session)(nil)
)

// Backend opens in-memory sessions. Its zero value is ready to use.
type Backend struct {
	mu       sync.Mutex
	sessions map[*Session]bool
	closed   bool
}

// New returns a Backend.
func New() *Backend { return &Backend{} }

// Open makes g's persistent buffers with their initial contents. It
// refuses a graph holding an op this backend cannot run.
func (b *Backend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	return b.open(ctx, g, nil)
}

// OpenShared is Open with the persistent buffers sh maps taking the first
// bytes of owner's (device.MemorySharer). This backend has no arenas: a
// temporary placed in one is refused.
func (b *Backend) OpenShared(ctx context.Context, g *dag.Graph, owner device.Session, sh device.Shared) (device.Session, error) {
	o, ok := owner.(*Session)
	if !ok || o.b != b {
		return nil, fmt.Errorf("memdev: OpenShared: the owner (%T) is not a session of this backend", owner)
	}
	if g == nil {
		return nil, errors.New("memdev: OpenShared: no graph")
	}
	lent := make([][]byte, len(g.Buffers))
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.usable(); err != nil {
		return nil, fmt.Errorf("memdev: OpenShared: the owner: %w", err)
	}
	for i, buf := range g.Buffers {
		if buf.Temporary && i < len(sh.Offsets) && sh.Offsets[i] >= 0 {
			return nil, fmt.Errorf("memdev: OpenShared: temporary %s is placed in an arena; this backend has none", buf.Name)
		}
		if buf.Temporary || i >= len(sh.Buffers) || sh.Buffers[i] == nil {
			continue
		}
		from := sh.Buffers[i]
		if from.ID < 0 || from.ID >= len(o.g.Buffers) || o.g.Buffers[from.ID] != from || from.Temporary || from.Size < buf.Size {
			return nil, fmt.Errorf("memdev: OpenShared: buffer %s cannot use the owner's %s: not a persistent buffer of its graph at least as large", buf.Name, from.Name)
		}
		lent[i] = o.mem[from.ID][:buf.Size:buf.Size]
	}
	return b.open(ctx, g, lent)
}

// open opens a session for g whose persistent buffers are lent[i] where
// that is not nil, else made here.
func (b *Backend) open(ctx context.Context, g *dag.Graph, lent [][]byte) (device.Session, error) {
	if g == nil {
		return nil, errors.New("memdev: Open: no graph")
	}
	var errs []error
	g.Walk(func(op *dag.Op) {
		if err := supported(op); err != nil {
			errs = append(errs, &dag.OpError{Op: op.Name, Err: fmt.Errorf("the mem backend cannot run it: %w", err)})
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Session{b: b, g: g, mem: make([][]byte, len(g.Buffers)), bodies: map[*dag.Op][][]device.Step{}}
	for _, buf := range g.Buffers {
		switch {
		case buf.ID < len(lent) && lent[buf.ID] != nil:
			s.mem[buf.ID] = lent[buf.ID]
		case !buf.Temporary:
			s.mem[buf.ID] = buf.InitialBytes()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("memdev: Open: the backend is %w", device.ErrClosed)
	}
	if b.sessions == nil {
		b.sessions = map[*Session]bool{}
	}
	b.sessions[s] = true
	return s, ctx.Err()
}

// Close closes the sessions still open.
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

// Session is one graph's memory, streams, events and captures. mu is held
// while a step does its work, so that Close, from another goroutine,
// waits for the step in progress and then stops the rest.
type Session struct {
	b *Backend
	g *dag.Graph

	mu      sync.Mutex
	stop    atomic.Bool // Close was called: a spin or loop in progress stops early
	closed  bool
	mem     [][]byte // by buffer ID; nil: a temporary not allocated
	streams int
	events  int
	err     error // the first failure since the last Sync; the steps after it are skipped

	world  *device.World
	bodies map[*dag.Op][][]device.Step

	capturing bool
	recording []step   // the capture in progress
	graphs    [][]step // by graph number; nil once destroyed
	ready     []bool   // instantiated
}

// step is one piece of work, done now or recorded in a capture.
type step struct {
	op    *dag.Op       // run op; nil for a fault
	delay time.Duration // Delay
	fail  error         // Fail: fail with this error, attributed to failOp
}

// NewStream creates the next stream; device is any ordinal, all memory
// being the host's.
func (s *Session) NewStream(device int, _ dag.Priority) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if device < 0 {
		return fmt.Errorf("memdev: NewStream: device %d does not exist", device)
	}
	s.streams++
	return nil
}

// NewEvent creates the next event.
func (s *Session) NewEvent() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	s.events++
	return nil
}

// Record checks its stream and event: the work before it is already done.
func (s *Session) Record(stream, event int) error { return s.checkEvent("Record", stream, event) }

// Wait checks its stream and event: the record it waits for, if any, came
// before it and is done.
func (s *Session) Wait(stream, event int) error { return s.checkEvent("Wait", stream, event) }

func (s *Session) checkEvent(verb string, stream, event int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.checkStream(verb, stream); err != nil {
		return err
	}
	if event < 0 || event >= s.events {
		return fmt.Errorf("memdev: %s: event %d does not exist (%d made)", verb, event, s.events)
	}
	return nil
}

// Run does op now, or records it while capturing.
func (s *Session) Run(stream int, op *dag.Op) error {
	if op == nil {
		return errors.New("memdev: Run: no op")
	}
	return s.enqueue("Run", stream, step{op: op})
}

// Delay pauses for d before the next step on stream.
func (s *Session) Delay(stream int, d time.Duration) error {
	return s.enqueue("Delay", stream, step{delay: d})
}

// Fail makes the run fail with err attributed to op when it gets here.
func (s *Session) Fail(stream int, op *dag.Op, err error) error {
	if op == nil || err == nil {
		return errors.New("memdev: Fail: give the op and its error")
	}
	return s.enqueue("Fail", stream, step{op: op, fail: err})
}

func (s *Session) enqueue(verb string, stream int, st step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.checkStream(verb, stream); err != nil {
		return err
	}
	if s.capturing {
		s.recording = append(s.recording, st)
		return nil
	}
	s.do(st)
	return nil
}

// do does one step unless an earlier one failed; it runs under mu.
func (s *Session) do(st step) {
	if s.err != nil {
		return
	}
	switch {
	case st.fail != nil:
		s.err = &dag.OpError{Op: st.op.Name, Err: st.fail}
	case st.op != nil:
		if err := s.run(st.op); err != nil {
			if _, named := errors.AsType[*dag.OpError](err); !named {
				err = &dag.OpError{Op: st.op.Name, Err: err}
			}
			s.err = err
		}
	default:
		time.Sleep(st.delay)
	}
}

// Sync reports the first error since the last Sync: every step is done
// by the time its call returns. After a failure the temporaries are
// dropped: the run's Frees were skipped, and the next run allocates them
// again.
func (s *Session) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.stop.Load() {
		return fmt.Errorf("memdev: Sync: the session was %w", device.ErrClosed)
	}
	err := s.err
	s.err = nil
	if err != nil {
		for i, buf := range s.g.Buffers {
			if buf.Temporary {
				s.mem[i] = nil
			}
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// Read returns a copy of persistent buffer b's contents.
func (s *Session) Read(b *dag.Buffer) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.buffer("Read", b)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), m...), nil
}

// Write overwrites persistent buffer b between runs.
func (s *Session) Write(b *dag.Buffer, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.buffer("Write", b)
	if err != nil {
		return err
	}
	if len(data) != len(m) {
		return fmt.Errorf("memdev: Write: %d bytes for the %d of buffer %s", len(data), len(m), b.Name)
	}
	copy(m, data)
	return nil
}

func (s *Session) buffer(verb string, b *dag.Buffer) ([]byte, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if b == nil || b.ID < 0 || b.ID >= len(s.g.Buffers) || s.g.Buffers[b.ID] != b {
		return nil, fmt.Errorf("memdev: %s: %v is not a buffer of the opened graph", verb, b)
	}
	if b.Temporary {
		return nil, fmt.Errorf("memdev: %s: %s is a temporary buffer", verb, b.Name)
	}
	return s.mem[b.ID], nil
}

// Close drops the session's memory. From another goroutine, it waits for
// the step in progress; the calls after it fail.
func (s *Session) Close() error {
	s.stop.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed, s.mem, s.graphs, s.recording = true, nil, nil, nil
	s.b.mu.Lock()
	delete(s.b.sessions, s)
	s.b.mu.Unlock()
	return nil
}

// Join makes the session rank w.Rank of w: its collectives go through
// w.Comm.
func (s *Session) Join(_ context.Context, w device.World) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if w.Comm == nil && w.Size > 1 {
		return errors.New("memdev: Join: a world of several ranks needs its Comm")
	}
	s.world = &w
	return nil
}

func (s *Session) usable() error {
	if s.closed || s.stop.Load() {
		return fmt.Errorf("memdev: the session is %w", device.ErrClosed)
	}
	return nil
}

func (s *Session) checkStream(verb string, stream int) error {
	if stream < 0 || stream >= s.streams {
		return fmt.Errorf("memdev: %s: stream %d does not exist (%d made)", verb, stream, s.streams)
	}
	return nil
}
