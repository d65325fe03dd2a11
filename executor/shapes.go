package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
)

// Shapes: one program at several values of its parameters (shapes), run
// from one object that keeps each shape's plan, session and captured graph
// ready, and one copy of the memory for them all (shapes_memory.go).

// ShapeFunc makes the graph of a program at the values of its parameters,
// by name: a shape. spec.Spec.Shape is one; a Go program writes its own.
// It is called once per shape the Shapes opens (again after the shape was
// dropped), never for two shapes at once.
type ShapeFunc func(ctx context.Context, values map[string]int64) (*dag.Graph, error)

// DefaultKeep is how many shapes a Shapes keeps open by default.
const DefaultKeep = 8

// shapesConfig is a Shapes' part of the options.
type shapesConfig struct {
	buckets  []map[string]int64
	keep     int
	paddable []string
	plan     func(context.Context, *dag.Graph) (*planner.Plan, error)
	initial  bool // WithInitialContents
	plans    *int // WithPlansKept; nil: the default
}

// WithBuckets makes a Shapes open and capture the shapes of these values
// when it opens, ahead of their first runs, and makes them its buckets: a
// value that is not one of them runs on the smallest larger bucket where
// the parameters that differ are paddable (WithPaddable), and otherwise
// eagerly, its ShapeRun saying why. Without buckets every value is a shape
// of its own, captured at its first run.
func WithBuckets(values ...map[string]int64) Option {
	return func(c *config) {
		for _, v := range values {
			c.shapes.buckets = append(c.shapes.buckets, maps.Clone(v))
		}
	}
}

// WithKeep bounds how many shapes a Shapes keeps open (DefaultKeep by
// default): opening one more drops the least recently run. A dropped shape
// is opened and captured again at its next run; its plan is kept (the
// plans of the last 64 shapes opened, or of 8n if more), so it is not
// built and planned again.
func WithKeep(n int) Option { return func(c *config) { c.shapes.keep = n } }

// minPlansKept is the fewest plans of shapes opened a Shapes keeps by
// default.
const minPlansKept = 64

// WithPlansKept bounds how many plans of the shapes it opened a Shapes
// keeps for the shapes it drops, should they return; 0 keeps none, so
// that a shape is built and planned at each opening. By default it keeps
// those of the last 64 shapes, or of 8 times WithKeep's if more.
func WithPlansKept(n int) Option { return func(c *config) { c.shapes.plans = &n } }

// WithPaddable names the parameters whose values may run on a larger
// bucket (WithBuckets): the program's promise that the extra elements are
// harmless (spec parameters say it with paddable: true).
func WithPaddable(names ...string) Option {
	return func(c *config) { c.shapes.paddable = append(c.shapes.paddable, names...) }
}

// WithPlanner makes a Shapes plan each shape's graph with f. By default it
// plans with planner.New, the options WithPlan gives and what the backend
// knows of its devices (MachineOf).
func WithPlanner(f func(ctx context.Context, g *dag.Graph) (*planner.Plan, error)) Option {
	return func(c *config) { c.shapes.plan = f }
}

// WithInitialContents makes a Shapes load a shape's initial contents into
// its persistent buffers whenever it runs after another shape (and at its
// first run), so that each shape's runs compute what a session of its own
// would (dagrun run with several values does this). Without it the
// buffers carry their contents from shape to shape, as from run to run.
func WithInitialContents() Option { return func(c *config) { c.shapes.initial = true } }

// Shapes runs one program at several shapes (values of its parameters) on
// one backend, keeping each shape's plan and session open, and its graph
// captured at its first run (or when it opens, for buckets), so that a
// run of a shape kept is one replay. At most WithKeep shapes are kept, the
// least recently run dropped first.
//
// On a backend that can share memory between sessions
// (device.MemorySharer: cpu, mem and cuda), the shapes share one copy of
// it: each persistent buffer, of one name in every shape, is allocated
// once at the largest size of the shapes opened (and starts with that
// shape's initial contents, of which a smaller shape's must be the first
// bytes), and each shape uses its first bytes; the temporaries of every
// shape come from one arena per memory, as large as the largest shape's.
// Persistent buffers therefore carry their contents from one run to the
// next whatever the shape. When a shape needs more than is held, every
// shape kept is dropped, the memory is allocated again, larger, and what
// the buffers held moves into their first bytes. Memory says what is held.
//
// Only one shape runs at a time: that is what lets them share the arena,
// and a call while another is in flight fails, matching device.ErrBusy.
// Close may be called from any goroutine.
type Shapes struct {
	b     device.Backend
	build ShapeFunc
	cfg   config
	opts  []Option // the sessions' options

	mu      sync.Mutex // held by the call in flight
	running atomic.Pointer[string]
	closed  atomic.Bool
	// current is the session of the shape in flight, for Close from
	// another goroutine.
	current atomic.Pointer[Session]

	kept    []*shape // least recently run first
	plans   planCache
	retired []*shape // taken out of kept, their sessions not yet closed (closeRetired)
	buckets []string // the buckets' keys, in the order given
	holder  *holder
	sharer  device.MemorySharer // nil: every shape has memory of its own
	last    *shape              // the shape run last (Read)
	lastKey string              // ... and its key, which outlives its dropping
	broken  error               // the shared memory was lost: every call fails with it
}

// shape is one shape kept open.
type shape struct {
	key    string
	values map[string]int64
	plan   *planner.Plan
	sess   *Session
	graph  *Graph   // nil: its runs are eager
	eager  string   // why it has no graph
	lend   *lending // nil: its memory is its own
	// captureFirst says its graph is captured while its first run runs
	// eagerly (runCapturing): the host records and instantiates
	// while the device computes.
	captureFirst bool
}

// ShapeRun says how a Shapes ran (or prepared, for Write) values.
type ShapeRun struct {
	Values map[string]int64 // the values asked for
	// Shape is the shape that ran them: Values, or the bucket they were
	// padded to.
	Shape  map[string]int64
	Padded bool
	Plan   *planner.Plan // the shape's
	// Opened says the shape was planned and opened for this run, and
	// Captured that its graph was captured then.
	Opened, Captured bool
	Replayed         bool   // the run was a replay of the shape's graph
	Eager            string // why the shape runs eagerly; "" when it replays
	// Dropped are the shapes closed to make room for this one, least
	// recently run first; Grew says the memory was allocated again,
	// larger, for it (every shape kept was dropped).
	Dropped []map[string]int64
	Grew    bool
	// Took is what opening the shape took, part by part, where this call
	// opened it (zero otherwise): the first run's costs beside its run.
	Took OpenTimes
}

// OpenTimes are the parts of opening shapes, on the host's clock.
type OpenTimes struct {
	Build time.Duration // making the graphs (the ShapeFunc)
	Plan  time.Duration // planning them
	Drop  time.Duration // closing the shapes dropped, and growing the memory
	Open  time.Duration // opening their sessions
	// Capture and Instantiate are their graphs' (GraphStats).
	Capture, Instantiate time.Duration
}

// OpenShapes opens a Shapes of the program build makes on backend b. The
// options are a session's (WithTiming, WithTemporaries, ...), a Runner's
// for Repeat (WithGraph: GraphNever keeps every shape eager; otherwise
// shapes are captured) and the Shapes' own (WithBuckets, WithKeep,
// WithPlansKept, WithPaddable, WithPlanner). The buckets are opened and
// captured now.
func OpenShapes(ctx context.Context, b device.Backend, build ShapeFunc, opts ...Option) (*Shapes, error) {
	if b == nil {
		return nil, errors.New("executor: OpenShapes: no backend")
	}
	if build == nil {
		return nil, errors.New("executor: OpenShapes: no function that makes the graphs")
	}
	s := &Shapes{b: b, build: build, opts: append(slices.Clone(opts), noAutoCapture)}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.shapes.keep == 0 {
		s.cfg.shapes.keep = DefaultKeep
	}
	s.plans.max = max(minPlansKept, 8*s.cfg.shapes.keep)
	if n := s.cfg.shapes.plans; n != nil {
		if *n < 0 {
			return nil, fmt.Errorf("executor: OpenShapes: WithPlansKept(%d): keep 0 plans or more", *n)
		}
		s.plans.max = *n
	}
	if s.cfg.shapes.keep < 1 {
		return nil, fmt.Errorf("executor: OpenShapes: WithKeep(%d): keep at least one shape", s.cfg.shapes.keep)
	}
	if n := len(s.cfg.shapes.buckets); n > s.cfg.shapes.keep {
		return nil, fmt.Errorf("executor: OpenShapes: %d buckets and WithKeep(%d): keep at least as many shapes as there are buckets", n, s.cfg.shapes.keep)
	}
	s.sharer, _ = b.(device.MemorySharer)
	for _, v := range s.cfg.shapes.buckets {
		k := shapeKey(v)
		if slices.Contains(s.buckets, k) {
			return nil, fmt.Errorf("executor: OpenShapes: bucket %s is given twice", k)
		}
		s.buckets = append(s.buckets, k)
	}
	if err := s.openBuckets(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// noAutoCapture keeps the shapes' sessions from capturing on their own:
// the Shapes captures them.
func noAutoCapture(c *config) { c.auto = 0 }

// shapeKey is values written as a shape is named: "T=512,U=3", by name.
func shapeKey(values map[string]int64) string {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(values)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(values[name], 10))
	}
	return b.String()
}

// begin makes the call verb the one in flight, or says which is.
func (s *Shapes) begin(verb string) (end func(), err error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("executor: Shapes: %s: the Shapes is %w", verb, device.ErrClosed)
	}
	if !s.mu.TryLock() {
		running := "another call"
		if r := s.running.Load(); r != nil {
			running = *r
		}
		return nil, fmt.Errorf("executor: Shapes: %s: %w: %s is in flight, and a Shapes runs one shape at a time", verb, device.ErrBusy, running)
	}
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, fmt.Errorf("executor: Shapes: %s: the Shapes is %w", verb, device.ErrClosed)
	}
	if s.broken != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("executor: Shapes: %s: %w", verb, s.broken)
	}
	s.running.Store(&verb)
	return func() {
		s.running.Store(nil)
		s.mu.Unlock()
	}, nil
}

// Run runs values once: a replay of their shape's graph, or an eager run
// (ShapeRun.Eager says why), opening the shape first if it is not kept. A
// shape opened for the run runs eagerly while its graph is captured
// (ShapeRun.Captured, not Replayed), where its plan allows that
// (no timer, host steps, tasks, loops or collectives): the host records
// the graph while the device computes. Others are captured, then
// replayed.
func (s *Shapes) Run(ctx context.Context, values map[string]int64) (*ShapeRun, error) {
	end, err := s.begin("Run of " + shapeKey(values))
	if err != nil {
		return nil, err
	}
	defer end()
	sh, sr, err := s.resolve(ctx, values, true)
	if err != nil {
		return sr, err
	}
	if err := s.started(sh); err != nil {
		return sr, errors.Join(err, s.closeRetired(&sr.Took))
	}
	defer s.current.Store(nil)
	switch {
	case sh.captureFirst:
		sh.captureFirst = false
		sh.graph, err = runCapturing(ctx, sh.sess, func() error { return s.closeRetired(&sr.Took) })
		if sh.graph != nil {
			st := sh.graph.Stats()
			sr.Captured, sr.Took.Capture, sr.Took.Instantiate = true, st.Capture, st.Instantiate
		}
	case sh.graph != nil:
		sr.Replayed = true
		err = sh.graph.Run(ctx)
	default:
		err = sh.sess.Run(ctx)
	}
	if err != nil {
		err = fmt.Errorf("executor: Shapes: run of %s: %w", sh.key, err)
	}
	if len(s.retired) > 0 { // the run ended before closing them
		err = errors.Join(err, s.closeRetired(&sr.Took))
	}
	return sr, err
}

// ShapeReport is what Repeat did: how the shape ran, and its Runner's
// report (the capture's and replays' figures in Replays).
type ShapeReport struct {
	ShapeRun
	*Report
}

// Repeat runs values n times, as a Runner does (replays launched in
// batches, with the Runner's options: WithProgress, WithTraceRuns, ...),
// on the shape that runs them.
func (s *Shapes) Repeat(ctx context.Context, values map[string]int64, n int) (*ShapeReport, error) {
	end, err := s.begin("Repeat of " + shapeKey(values))
	if err != nil {
		return nil, err
	}
	defer end()
	if n < 1 {
		return nil, fmt.Errorf("executor: Shapes: Repeat of %s: %d runs; run at least once", shapeKey(values), n)
	}
	sh, sr, err := s.resolve(ctx, values, false)
	if err != nil {
		return &ShapeReport{ShapeRun: *sr}, err
	}
	if sh.captureFirst { // opened by a Run that did not start it
		sh.captureFirst = false
		if sh.graph, err = sh.sess.Capture(ctx); err != nil {
			return &ShapeReport{ShapeRun: *sr}, fmt.Errorf("executor: Shapes: capture %s: %w", sh.key, err)
		}
	}
	if err := s.started(sh); err != nil {
		return &ShapeReport{ShapeRun: *sr}, err
	}
	defer s.current.Store(nil)
	r := newRunner([]*Session{sh.sess}, s.opts)
	r.cfg.graph = GraphNever
	if sh.graph != nil {
		r.cfg.graph, r.graph = GraphAlways, sh.graph
		sr.Replayed = true
	}
	rep, err := r.Run(ctx, n)
	if err != nil {
		err = fmt.Errorf("executor: Shapes: run of %s: %w", sh.key, err)
	}
	return &ShapeReport{ShapeRun: *sr, Report: rep}, err
}

// started makes sh the shape in flight and the one run last (enter).
func (s *Shapes) started(sh *shape) error {
	if err := s.enter(sh); err != nil {
		return err
	}
	s.current.Store(sh.sess)
	return nil
}

// enter makes sh the shape run last, loading its initial contents first
// where WithInitialContents asks for them and another shape ran last.
func (s *Shapes) enter(sh *shape) error {
	if s.cfg.shapes.initial && s.lastKey != sh.key {
		for _, b := range sh.plan.Graph.Buffers {
			if b.Temporary {
				continue
			}
			if err := sh.sess.Write(b, b.InitialBytes()); err != nil {
				return fmt.Errorf("executor: Shapes: load the initial contents of %s: %w", sh.key, err)
			}
		}
	}
	s.last, s.lastKey = sh, sh.key
	s.markRun()
	return nil
}

// markRun notes that the shared memory no longer holds only its initial
// contents.
func (s *Shapes) markRun() {
	if s.holder != nil {
		s.holder.dirty = true
	}
}

// Read returns the contents of persistent buffer name as the shape run
// last sees it: its first bytes, as many as that shape declares.
func (s *Shapes) Read(name string) ([]byte, error) {
	end, err := s.begin("Read of " + name)
	if err != nil {
		return nil, err
	}
	defer end()
	if s.last == nil || s.last.sess == nil {
		return nil, fmt.Errorf("executor: Shapes: Read of %s: no shape has run, or the one run last was dropped", name)
	}
	b, err := s.last.buffer(name)
	if err != nil {
		return nil, err
	}
	return s.last.sess.Read(b)
}

// Write loads data into persistent buffer name for the next run of
// values, opening (and capturing) their shape if it is not kept. data
// fills the buffer as that shape declares it; where values are padded to a
// larger bucket, data may be shorter, and the bytes after it are zeros.
func (s *Shapes) Write(ctx context.Context, values map[string]int64, name string, data []byte) (*ShapeRun, error) {
	end, err := s.begin("Write for " + shapeKey(values))
	if err != nil {
		return nil, err
	}
	defer end()
	sh, sr, err := s.resolve(ctx, values, false)
	if err != nil {
		return sr, err
	}
	b, err := sh.buffer(name)
	if err != nil {
		return sr, err
	}
	if int64(len(data)) != b.Size {
		if !sr.Padded || int64(len(data)) > b.Size {
			return sr, fmt.Errorf("executor: Shapes: Write of %s for %s: %d bytes for the %d of the buffer", name, sh.key, len(data), b.Size)
		}
		data = append(slices.Clip(data), make([]byte, b.Size-int64(len(data)))...)
	}
	if err := s.enter(sh); err != nil {
		return sr, err
	}
	return sr, sh.sess.Write(b, data)
}

// buffer is the persistent buffer of the shape's graph called name.
func (sh *shape) buffer(name string) (*dag.Buffer, error) {
	for _, b := range sh.plan.Graph.Buffers {
		if b.Name == name && !b.Temporary {
			return b, nil
		}
	}
	return nil, fmt.Errorf("executor: Shapes: shape %s has no persistent buffer %q", sh.key, name)
}

// Kept returns the values of the shapes kept, least recently run first.
func (s *Shapes) Kept() []map[string]int64 {
	end, err := s.begin("Kept")
	if err != nil {
		return nil
	}
	defer end()
	out := make([]map[string]int64, len(s.kept))
	for i, sh := range s.kept {
		out[i] = maps.Clone(sh.values)
	}
	return out
}

// Memory says what the Shapes holds for its shapes, memory by memory
// (host memories first), and whether they share it: shared is false, and
// why says why, on a backend that cannot share memory between sessions,
// where every shape kept holds its own.
func (s *Shapes) Memory() (held []HeldMemory, shared bool, why string) {
	end, err := s.begin("Memory")
	if err != nil {
		return nil, false, err.Error()
	}
	defer end()
	if s.sharer == nil {
		return nil, false, fmt.Sprintf("the backend (%T) cannot open a session over another's memory (device.MemorySharer): every shape holds its own", s.b)
	}
	h := s.holder
	if h == nil {
		return nil, true, ""
	}
	by := map[int]*HeldMemory{}
	at := func(m int) *HeldMemory {
		if by[m] == nil {
			by[m] = &HeldMemory{Memory: m}
		}
		return by[m]
	}
	for _, b := range h.g.Buffers {
		at(plan.BufferMemory(b)).Persistent += b.Size
	}
	for m, size := range h.arenas {
		at(m).Arena = size
	}
	for _, m := range slices.Sorted(maps.Keys(by)) {
		held = append(held, *by[m])
	}
	return held, true, ""
}

// Close closes every shape kept and the shared memory. From another
// goroutine it ends the run in flight first, and waits for it.
func (s *Shapes) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if cur := s.current.Load(); cur != nil {
		_ = cur.Close() // ends the run in flight; closed again below
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.dropAll()
	if s.holder != nil {
		if err := s.holder.d.Close(); err != nil {
			errs = append(errs, fmt.Errorf("executor: Shapes: close the shapes' memory: %w", err))
		}
		s.holder = nil
	}
	return errors.Join(errs...)
}
