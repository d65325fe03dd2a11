package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Backend is the CUDA device runtime (a device.Backend): from New to Close
// it keeps what is costly to make, so that sessions open in well under a
// millisecond: each device's primary context, retained on first use; NVRTC,
// loaded on first compile; every module a session loaded, kept per device
// and keyed by content, so a kernel is compiled and loaded once per device;
// the device's default memory pool, which keeps freed temporaries for
// reuse; cuBLASLt, its handles and the algorithm picked for each GEMM
// signature; and the streams and events of sessions closed cleanly, for
// the next ones. Sessions (Open) hold the rest. Open, Live and Close are safe from
// several goroutines; each Session is used from one goroutine.
//
// The driver library stays loaded for the life of the process: unloading it
// while its threads run is unsafe.
type Backend struct {
	drv        *driver
	lt         *ltShared // cuBLASLt: the library, a handle per device, the algorithms picked
	reuse      *recycler // streams and events of closed sessions
	initOnHost bool      // config.initOnHost

	mu       sync.Mutex // guards what follows
	comp     compiler
	devs     map[int]*gpu
	live     Resources // Contexts and Modules
	sessions map[*Session]struct{}
	closed   bool
	multi    multiGPU // peer access and NCCL (peer_session.go)
	copyColl bool     // CopyCollectives
	// copyWorlds are the worlds of ranks in this process whose
	// all-reduces run by copies, by NCCL unique id (copycoll.go).
	copyWorlds map[NCCLUniqueID]*copyWorld
	prepared   map[*dag.Graph]*hostPrep // host buffers made ahead of Open (hostprep.go)
}

var _ device.Backend = (*Backend)(nil)

// Resources counts what a Backend or a Session holds; all zero after Close.
type Resources struct {
	Contexts     int // retained primary contexts (backend)
	Streams      int
	Events       int // plan events, timing events and capture events
	Modules      int // loaded modules (backend)
	DeviceAllocs int // persistent device buffers (cuMemAlloc)
	PoolAllocs   int // temporary device buffers allocated from the pool and not yet freed
	PinnedAllocs int // pinned host buffers (registered huge pages or cuMemHostAlloc)
	HostAllocs   int // C heap blocks: pageable buffers and per-op launch records
	Callbacks    int // host-step handles
	Graphs       int // captured graphs and their executables
	Kept         int // streams and events of closed sessions kept for the next (backend)
}

// Total is the number of resources held.
func (r Resources) Total() int {
	return r.Contexts + r.Streams + r.Events + r.Modules + r.DeviceAllocs + r.PoolAllocs +
		r.PinnedAllocs + r.HostAllocs + r.Callbacks + r.Graphs + r.Kept
}

func (r Resources) plus(o Resources) Resources {
	return Resources{
		Contexts: r.Contexts + o.Contexts, Streams: r.Streams + o.Streams, Events: r.Events + o.Events,
		Modules: r.Modules + o.Modules, DeviceAllocs: r.DeviceAllocs + o.DeviceAllocs,
		PoolAllocs: r.PoolAllocs + o.PoolAllocs, PinnedAllocs: r.PinnedAllocs + o.PinnedAllocs,
		HostAllocs: r.HostAllocs + o.HostAllocs, Callbacks: r.Callbacks + o.Callbacks, Graphs: r.Graphs + o.Graphs,
		Kept: r.Kept + o.Kept,
	}
}

// gpu is one device's shared state. Its fields are set when it is made
// and never change, except the module cache, which the backend's mutex
// guards.
type gpu struct {
	ordinal         int
	info            deviceInfo
	ctx             C.CUcontext
	least, greatest int
	pool            C.CUmemoryPool
	modules         map[moduleKey]C.CUmodule // by content; guarded by Backend.mu
	funcs           map[funcKey]C.CUfunction // guarded by Backend.mu
	fill64          C.CUfunction             // set with the builtins module; guarded by Backend.mu
	initRandom      C.CUfunction             // likewise
}

// defaultConfig is the configuration before New's options: the
// environment's paths and the usual cache folder.
func defaultConfig() config {
	return config{
		libcuda:  os.Getenv("DAGRUN_LIBCUDA"),
		nvrtc:    os.Getenv("DAGRUN_NVRTC"),
		cublasLt: cublasLtCandidates(os.Getenv("DAGRUN_CUBLASLT")),
		cacheDir: defaultCacheDir(),
		copyColl: os.Getenv("DAGRUN_COPY_COLLECTIVES") == "1",
	}
}

// New loads the CUDA driver. The error matches ErrNoDriver when there is
// none to use. Nothing is made on a device until the first Open.
func New(opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.copyColl {
		if err := copyConnections(os.Getenv(maxConnectionsVar)); err != nil {
			return nil, err
		}
	}
	drv, err := openDriver(libcudaCandidates(cfg.libcuda))
	if err != nil {
		return nil, err
	}
	return &Backend{
		drv:        drv,
		comp:       compiler{candidates: nvrtcCandidates(cfg.nvrtc), cacheDir: cfg.cacheDir},
		devs:       map[int]*gpu{},
		lt:         newLtShared(drv, cfg.cublasLt),
		reuse:      newRecycler(drv),
		multi:      multiGPU{noPeer: cfg.noPeer, libnccl: cfg.libnccl, ncclRes: cfg.nccl},
		copyColl:   cfg.copyColl,
		initOnHost: cfg.initOnHost,
	}, nil
}

// Live reports what the backend holds now: its own contexts and modules,
// the streams and events it keeps for sessions to come, plus everything
// its open sessions hold.
func (b *Backend) Live() Resources {
	b.mu.Lock()
	r := b.live
	if b.reuse != nil {
		r.Kept = b.reuse.kept()
	}
	open := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.mu.Unlock()
	for _, s := range open {
		r = r.plus(s.Live())
	}
	return r
}

// Sessions is the number of sessions open on b.
func (b *Backend) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// DriverVersion is the CUDA version of the driver, for example 13000.
func (b *Backend) DriverVersion() int { return b.drv.version }

// Open starts a *Session for g (device.Backend): it loads the kernels g
// launches (from the backend's cache after the first time) and allocates
// g's persistent buffers with their initial contents. On error it releases
// what it made.
func (b *Backend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := b.OpenSession(ctx, g)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenSession is Open returning the *Session itself.
func (b *Backend) OpenSession(ctx context.Context, g *dag.Graph) (*Session, error) {
	if b == nil || b.drv == nil {
		return nil, errors.New("cuda: Open: the backend was not made by cuda.New")
	}
	if g == nil {
		return nil, errors.New("cuda: Open: no graph")
	}
	return b.openSession(ctx, g, nil)
}

// openSession opens a session for g that takes memory from l where l is
// not nil (OpenShared, shared.go).
func (b *Backend) openSession(ctx context.Context, g *dag.Graph, l *lender) (*Session, error) {
	if err := device.CheckBodies(b, g); err != nil {
		return nil, fmt.Errorf("cuda: Open: %w", err)
	}
	s := newSession(b, g)
	s.hold.lender = l
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("cuda: Open: the backend is %w; make another with cuda.New", device.ErrClosed)
	}
	if b.sessions == nil {
		b.sessions = map[*Session]struct{}{}
	}
	b.sessions[s] = struct{}{}
	b.mu.Unlock()
	if err := openDevices(ctx, s); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// forget drops a closed session from the backend's set.
func (b *Backend) forget(s *Session) {
	b.mu.Lock()
	delete(b.sessions, s)
	b.mu.Unlock()
}

// device returns device ordinal, retaining its primary context and setting
// up its memory pool on first use.
func (b *Backend) device(ordinal int) (*gpu, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("cuda: the backend is %w", device.ErrClosed)
	}
	if d := b.devs[ordinal]; d != nil {
		return d, nil
	}
	info, err := b.drv.device(ordinal)
	if err != nil {
		return nil, err
	}
	c, err := b.drv.retainPrimary(info.dev)
	if err != nil {
		return nil, err
	}
	d := &gpu{ordinal: ordinal, info: info, ctx: c, modules: map[moduleKey]C.CUmodule{}, funcs: map[funcKey]C.CUfunction{}}
	b.devs[ordinal] = d
	b.live.Contexts++
	if d.least, d.greatest, err = b.drv.priorityRange(c); err != nil {
		return nil, err
	}
	if d.pool, err = b.drv.pools.setup(c, info.dev); err != nil {
		return nil, err
	}
	if err := b.addPeers(d); err != nil {
		return nil, err
	}
	return d, nil
}

// Close closes the sessions still open, then unloads every module, trims
// the memory pools, releases the primary contexts and unloads NVRTC. It
// reports the first failure but releases everything it can. An Open after
// Close is refused; closing twice does nothing.
func (b *Backend) Close() error {
	if b == nil || b.drv == nil {
		return nil // nothing was made
	}
	b.mu.Lock()
	open := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range open {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.Join(errs...)
	}
	b.closed = true
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	keep(b.lt.close()) // its handles live in the contexts released below
	keep(b.reuse.close())
	for _, d := range b.devs {
		for _, m := range d.modules {
			keep(b.drv.moduleUnload(d.ctx, m))
			b.live.Modules--
		}
		d.modules, d.funcs, d.fill64 = nil, nil, nil
		if d.pool != nil {
			keep(b.drv.pools.trim(d.ctx, d.pool))
		}
		keep(b.drv.releasePrimary(d.info.dev))
		b.live.Contexts--
	}
	b.devs = nil
	for _, hp := range b.prepared {
		hp.free() // made ahead for an Open that never came
	}
	b.prepared = nil
	b.comp.close()
	if len(errs) > 0 {
		return fmt.Errorf("cuda: closing: %w", errors.Join(errs...))
	}
	return nil
}
