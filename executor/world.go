package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
)

// Ranks. A program whose graph holds collectives (dag.AllReduce ...) runs
// as a world of N ranks, each rank a session of its own running its own
// plan (one spec gives one graph per rank). OpenWorld runs all N ranks in
// this process, one goroutine per rank; JoinWorld runs one rank here and
// meets the others, in other processes, at a TCP rendezvous. Either way
// the ranks first compare their collective sequences
// (dag.Graph.CollectiveSequence: kinds, element types and counts,
// reductions, roots, in issue order) and refuse to start, naming the first
// difference, when they disagree; and a rank that fails makes the others
// fail instead of waiting for it.

// worldConfig is the part of a session's options about its world.
type worldConfig struct {
	join     *device.World // Open joins the device session to it
	timeout  time.Duration // bound on every wait for another rank; 0: comm.DefaultTimeout
	listener net.Listener  // rank 0's rendezvous listener, instead of Place.Addr's port
	waiting  func(missing []int, waited time.Duration)
}

// WithJoin makes Open join the device session to w (device.Joiner) after
// opening it and before making its streams. OpenWorld and JoinWorld use
// it; call it directly only to build a world of your own.
func WithJoin(w device.World) Option { return func(c *config) { c.world.join = &w } }

// WithRankTimeout bounds every wait of a rank for another (the rendezvous,
// a collective's data, a recv); the default is 5 minutes.
func WithRankTimeout(d time.Duration) Option { return func(c *config) { c.world.timeout = d } }

// WithRankWaiting makes JoinWorld's rendezvous call waiting every few
// seconds while it waits, with the ranks it waits for and the time so far
// (rank 0 waits for the ranks not in yet; the others for rank 0).
func WithRankWaiting(waiting func(missing []int, waited time.Duration)) Option {
	return func(c *config) { c.world.waiting = waiting }
}

// WithRendezvousListener makes rank 0 of JoinWorld take the other ranks'
// connections on l instead of listening on its Place's port (tests pass a
// listener on a free port). JoinWorld closes it.
func WithRendezvousListener(l net.Listener) Option {
	return func(c *config) { c.world.listener = l }
}

// join makes d a rank of its world, when the options name one. A session
// that cannot join may still be the one rank of a world of 1.
func join(ctx context.Context, d device.Session, wc worldConfig) error {
	w := wc.join
	if w == nil {
		return nil
	}
	j, ok := d.(device.Joiner)
	if !ok {
		if w.Size == 1 {
			return nil
		}
		return fmt.Errorf("executor: device session %T runs no collectives, so it cannot be rank %d of a world of %d", d, w.Rank, w.Size)
	}
	if err := j.Join(ctx, *w); err != nil {
		return fmt.Errorf("executor: rank %d of %d could not join its world: %w", w.Rank, w.Size, err)
	}
	if t, ok := d.(device.CollectiveTimeouter); ok && wc.timeout > 0 {
		t.SetCollectiveTimeout(wc.timeout)
	}
	return nil
}

// Place is where one process stands in a world: its rank, the world's
// size, its rank among the processes of its machine (which picks its
// device) and the address of rank 0's rendezvous (host:port). Make one
// with comm's Discover (torchrun, Slurm and Open MPI variables) or
// Explicit, as the CLI does, or by hand.
type Place = comm.Place

// RankError is the failure of one rank of a world.
type RankError struct {
	Rank int
	Err  error
}

func (e *RankError) Error() string { return fmt.Sprintf("rank %d: %v", e.Rank, e.Err) }
func (e *RankError) Unwrap() error { return e.Err }

// failures collects the ranks' errors in the order they fail. The first
// is the cause; a later one that only says another rank failed, or that
// the run was abandoned because of it, is its consequence.
type failures struct {
	mu    sync.Mutex
	first []error
	later []error
}

func (f *failures) add(rank int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	re := &RankError{Rank: rank, Err: err}
	if len(f.first) == 0 {
		f.first = append(f.first, re)
		return
	}
	if errors.Is(err, comm.ErrAborted) || errors.Is(err, context.Canceled) || errors.Is(err, errRankFailed) {
		return
	}
	f.later = append(f.later, re)
}

func (f *failures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(append(f.first, f.later...)...)
}

// errRankFailed is the cause the other ranks' runs are cancelled with when
// one rank of an in-process world fails.
var errRankFailed = errors.New("another rank failed")

// World is the N ranks of one program in this process: one session per
// rank, each run from a goroutine of its own, their collectives joined
// through the backend's collective library (NCCL, one communicator made
// from a unique id) or, for a backend without one (cpu), through
// in-process mailboxes. A World is for one goroutine at a time; its
// methods run the ranks concurrently themselves.
type World struct {
	ranks  []*Session
	comms  []*comm.Comm // nil when the backend brings its own collectives
	p2p    bool         // some rank sends or receives: check after each run that every send met its recv
	opened time.Time    // when every rank had joined: the ranks' common clock origin
	broken error        // a failed run left the collectives unusable
	closed atomic.Bool
	once   sync.Once // Close's work; a second Close waits for the first
	cerr   error     // what Close's work returned
}

// OpenWorld opens plans[r] as rank r of a world of len(plans) ranks on
// backend b (rank r's plan places its work on device r, or wherever the
// caller put it). It checks each graph against the world's size
// (dag.Graph.CheckWorld), compares the ranks' collective sequences, makes
// the world (a unique id from b's UniqueIDer on rank 0, else in-process
// communicators), and opens and joins every rank at once, each from its
// own goroutine. If any rank fails to open, the others are closed and the
// error names the rank. opts apply to every rank.
func OpenWorld(ctx context.Context, b device.Backend, plans []*planner.Plan, opts ...Option) (*World, error) {
	n := len(plans)
	if n == 0 {
		return nil, errors.New("executor: OpenWorld: no plans: a world has at least one rank")
	}
	if b == nil {
		return nil, errors.New("executor: OpenWorld: no backend")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var errs []error
	seqs := make([][]string, n)
	for r, p := range plans {
		if err := checkPlan(p); err != nil {
			errs = append(errs, &RankError{Rank: r, Err: err})
			continue
		}
		if err := p.Graph.CheckWorld(n); err != nil {
			errs = append(errs, &RankError{Rank: r, Err: err})
			continue
		}
		seqs[r] = p.Graph.CollectiveSequence()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := comm.CompareSequences(seqs); err != nil {
		return nil, fmt.Errorf("executor: the ranks' plans cannot run together: %w", err)
	}

	worlds := make([]device.World, n)
	var comms []*comm.Comm
	if u, ok := b.(device.UniqueIDer); ok {
		id, err := u.UniqueID()
		if err != nil {
			return nil, fmt.Errorf("executor: make the world's unique id on rank 0: %w", err)
		}
		for r := range worlds {
			worlds[r] = device.World{Rank: r, Size: n, UniqueID: id}
		}
	} else {
		var err error
		if comms, err = comm.NewLocal(n, comm.Options{Timeout: cfg.world.timeout}); err != nil {
			return nil, fmt.Errorf("executor: OpenWorld: %w", err)
		}
		for r := range worlds {
			worlds[r] = device.World{Rank: r, Size: n, Comm: comms[r]}
		}
	}

	// Every rank opens and joins at once: NCCL's join returns only when
	// all ranks have joined. A rank that fails cancels the others' joins.
	w := &World{ranks: make([]*Session, n), comms: comms}
	for _, p := range plans {
		w.p2p = w.p2p || pointToPoint(p.Graph)
	}
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var fl failures
	var wg sync.WaitGroup
	for r := range plans {
		wg.Go(func() {
			s, err := Open(jctx, b, plans[r], append(slices.Clip(opts), WithJoin(worlds[r]))...)
			if err != nil {
				fl.add(r, err)
				w.abort(r, err)
				cancel(errRankFailed)
				return
			}
			w.ranks[r] = s
		})
	}
	wg.Wait()
	if err := fl.err(); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	w.opened = time.Now()
	return w, nil
}

// Size is the number of ranks.
func (w *World) Size() int { return len(w.ranks) }

// Rank returns rank r's session: for Read, Write, Spans or Device between
// runs. Run the ranks through the World, never one alone: a rank's
// collectives wait for the others.
func (w *World) Rank(r int) *Session { return w.ranks[r] }

// Opened is when every rank had joined the world: the common origin of
// the ranks' clocks in traces.
func (w *World) Opened() time.Time { return w.opened }

// Run runs every rank's plan once, each from its own goroutine, and waits
// for all of them. When a rank fails, the others are told at once (their
// collectives fail instead of waiting for it, their runs are abandoned)
// and the error is a *RankError for the rank that failed first, joined
// with the errors of other ranks that failed on their own. A world whose
// run failed cannot run again: close it.
func (w *World) Run(ctx context.Context) error {
	return w.each(ctx, "Run", func(ctx context.Context, r int) error { return w.ranks[r].Run(ctx) })
}

// Read returns the contents of persistent buffer b of rank r's graph after
// the last run.
func (w *World) Read(r int, b *dag.Buffer) ([]byte, error) {
	if r < 0 || r >= len(w.ranks) {
		return nil, fmt.Errorf("executor: Read: rank %d is not in a world of %d", r, len(w.ranks))
	}
	return w.ranks[r].Read(b)
}

// each runs f for every rank at once and then, for a world whose
// collectives go through comm and some rank sends or receives, checks
// that every send met its recv.
func (w *World) each(ctx context.Context, verb string, f func(ctx context.Context, r int) error) error {
	switch {
	case w.closed.Load():
		return fmt.Errorf("executor: %s: the world is %w", verb, device.ErrClosed)
	case w.broken != nil:
		return fmt.Errorf("executor: %s: an earlier run failed and left the ranks' collectives unusable: close the world (%w)", verb, w.broken)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var fl failures
	var wg sync.WaitGroup
	for r := range w.ranks {
		wg.Go(func() {
			err := f(rctx, r)
			if err == nil && w.comms != nil && w.p2p {
				err = w.comms[r].Finish(rctx)
			}
			if err != nil {
				fl.add(r, err)
				w.abort(r, err)
				cancel(errRankFailed)
			}
		})
	}
	wg.Wait()
	err := fl.err()
	if err != nil && w.comms != nil {
		w.broken = err
	}
	return err
}

// pointToPoint reports whether g sends or receives.
func pointToPoint(g *dag.Graph) bool {
	for _, op := range g.Ops {
		if op.Kind.Info().PointToPoint {
			return true
		}
	}
	return false
}

// abort tells the other ranks that rank r failed with err.
func (w *World) abort(r int, err error) {
	if w.comms != nil {
		w.comms[r].Abort(err)
	}
}

// Capture captures every rank's plan (Session.Capture), each from its own
// goroutine, as one WorldGraph to replay. On CUDA, run the world once
// first: NCCL connects the ranks at their first collectives, which a
// graph cannot hold, so the cuda backend refuses to capture collectives
// that have not run.
func (w *World) Capture(ctx context.Context) (*WorldGraph, error) {
	g := &WorldGraph{w: w, graphs: make([]*Graph, len(w.ranks))}
	err := w.each(ctx, "Capture", func(ctx context.Context, r int) error {
		rg, err := w.ranks[r].Capture(ctx)
		g.graphs[r] = rg
		return err
	})
	if err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

// WorldGraph is the captured graphs of every rank of a World.
type WorldGraph struct {
	w      *World
	graphs []*Graph
}

// Rank returns rank r's graph, for its Stats or an Update.
func (g *WorldGraph) Rank(r int) *Graph { return g.graphs[r] }

// Run replays every rank's graph once, each from its own goroutine, and
// waits for them, with World.Run's handling of failures.
func (g *WorldGraph) Run(ctx context.Context) error {
	return g.w.each(ctx, "replay", func(ctx context.Context, r int) error { return g.graphs[r].Run(ctx) })
}

// Close releases every rank's graph.
func (g *WorldGraph) Close() error {
	var errs []error
	for _, rg := range g.graphs {
		if rg != nil {
			errs = append(errs, rg.Close())
		}
	}
	return errors.Join(errs...)
}

// Close closes every rank's session (each from its own goroutine, since a
// collective library may wait for the ranks to leave together) and the
// world's communicators. It is safe from any goroutine; closing twice is
// harmless, and a second Close waits for the first.
func (w *World) Close() error {
	w.once.Do(func() { w.cerr = w.close() })
	return w.cerr
}

func (w *World) close() error {
	w.closed.Store(true)
	errs := make([]error, len(w.ranks)+len(w.comms))
	var wg sync.WaitGroup
	for r, s := range w.ranks {
		if s != nil {
			wg.Go(func() { errs[r] = s.Close() })
		}
	}
	wg.Wait()
	for r, c := range w.comms {
		errs[len(w.ranks)+r] = c.Close()
	}
	return errors.Join(errs...)
}

// Rank is one rank of a world whose other ranks run in other processes
// (JoinWorld): one session, joined to the others through a TCP rendezvous.
// Like a Session it is for one goroutine.
type Rank struct {
	s          *Session
	c          *comm.Comm
	place      Place
	lib        bool // the backend brings its own collectives: c only carries failures
	rendezvous time.Time
	broken     error
	closed     atomic.Bool
	once       sync.Once // Close's work; a second Close waits for the first
	cerr       error
}

// JoinWorld runs plan p as one rank of a world of processes: it checks p
// against the world's size, meets the other ranks at rank 0's rendezvous
// (place.Addr; rank 0 listens there) where they compare their collective
// sequences and rank 0 hands every rank the backend's unique id (from its
// UniqueIDer, for NCCL), then opens p on b joined to that world. The error
// names the ranks that did not arrive within the timeout
// (WithRankTimeout), or the first collective the ranks disagree on.
func JoinWorld(ctx context.Context, b device.Backend, p *planner.Plan, place Place, opts ...Option) (*Rank, error) {
	if b == nil {
		return nil, errors.New("executor: JoinWorld: no backend")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	closeListener := func() {
		if cfg.world.listener != nil {
			cfg.world.listener.Close()
		}
	}
	if place.Rank != 0 {
		closeListener() // only rank 0 listens
		cfg.world.listener = nil
	}
	if err := checkPlan(p); err != nil {
		closeListener()
		return nil, err
	}
	if err := p.Graph.CheckWorld(place.World); err != nil {
		closeListener()
		return nil, fmt.Errorf("executor: rank %d: %w", place.Rank, err)
	}
	u, lib := b.(device.UniqueIDer)
	var id []byte
	if lib && place.Rank == 0 {
		var err error
		if id, err = u.UniqueID(); err != nil {
			closeListener()
			return nil, fmt.Errorf("executor: make the world's unique id on rank 0: %w", err)
		}
	}
	c, err := comm.Rendezvous(ctx, comm.Config{
		Place:    place,
		Sequence: p.Graph.CollectiveSequence(),
		Payload:  id,
		Listener: cfg.world.listener,
		Options:  comm.Options{Timeout: cfg.world.timeout, Waiting: cfg.world.waiting},
	})
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	met := time.Now()
	dw := device.World{Rank: place.Rank, Size: place.World}
	if lib {
		dw.UniqueID = c.Payload()
	} else {
		dw.Comm = c
	}
	s, err := Open(ctx, b, p, append(slices.Clip(opts), WithJoin(dw))...)
	if err != nil {
		c.Abort(err)
		return nil, errors.Join(err, c.Close())
	}
	return &Rank{s: s, c: c, place: place, lib: lib, rendezvous: met}, nil
}

// Place is where this rank stands in its world.
func (r *Rank) Place() Place { return r.place }

// Rendezvous is when this rank left the rendezvous. Every rank leaves it
// at about the same moment (rank 0 lets them all in at once), so traces of
// several processes align their clocks there.
func (r *Rank) Rendezvous() time.Time { return r.rendezvous }

// Session returns the rank's session: for Read, Write, Spans or Device
// between runs.
func (r *Rank) Session() *Session { return r.s }

// Run runs the rank's plan once. When it fails, the other ranks are told
// at once (their collectives fail instead of waiting for this one); when
// another rank fails, this rank's collectives fail naming it. On the cpu
// backend every run ends by checking, with the other ranks, that every
// send met its recv. A rank whose run failed cannot run again: close it.
func (r *Rank) Run(ctx context.Context) error {
	return r.run(ctx, "Run", r.s.Run)
}

// Capture captures the rank's plan (Session.Capture).
func (r *Rank) Capture(ctx context.Context) (*Graph, error) {
	var g *Graph
	err := r.run(ctx, "Capture", func(ctx context.Context) error {
		var err error
		g, err = r.s.Capture(ctx)
		return err
	})
	return g, err
}

// Replay replays a graph of the rank's (from Capture) once, with Run's
// handling of failures.
func (r *Rank) Replay(ctx context.Context, g *Graph) error {
	return r.run(ctx, "Replay", g.Run)
}

func (r *Rank) run(ctx context.Context, verb string, f func(context.Context) error) error {
	switch {
	case r.closed.Load():
		return fmt.Errorf("executor: %s: rank %d is %w", verb, r.place.Rank, device.ErrClosed)
	case r.broken != nil:
		return fmt.Errorf("executor: %s: an earlier run failed and left the ranks' collectives unusable: close the rank (%w)", verb, r.broken)
	}
	var err error
	if r.lib {
		err = r.watched(ctx, f)
	} else if err = f(ctx); err == nil {
		err = r.c.Finish(ctx)
	}
	if err != nil {
		r.c.Abort(err)
		r.broken = err
		return &RankError{Rank: r.place.Rank, Err: err}
	}
	return nil
}

// watched runs f with a context that ends when another rank fails (its
// abort, or its process gone, reaches this rank's rendezvous connection):
// the backend's collectives then wait for a rank that will never come, and
// the backend must give up on them when the context ends (on CUDA:
// ncclCommAbort).
func (r *Rank) watched(ctx context.Context, f func(context.Context) error) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.c.Watch(wctx); err != nil {
			cancel(err)
		}
	}()
	err := f(wctx)
	cancel(nil)
	<-done
	if cause := context.Cause(wctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) && ctx.Err() == nil {
		// The run was abandoned because another rank failed: say so.
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// Close closes the rank's session and leaves the world. Rank 0 waits (up
// to the timeout) for the others to leave first, since their messages
// pass through it. Closing twice is harmless.
func (r *Rank) Close() error {
	r.once.Do(func() {
		r.closed.Store(true)
		r.cerr = errors.Join(r.s.Close(), r.c.Close())
	})
	return r.cerr
}
