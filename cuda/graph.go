package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Graph capture. A session captures by stream capture: BeginCapture
// starts a capture on an origin stream and forks every other stream from
// it with an event, so that the Run, Record and Wait calls that follow are
// recorded on every stream instead of run; EndCapture joins the streams
// back with the same event and ends the capture. Allocs and frees become
// memory nodes, host steps host nodes. The same submission code serves
// eager runs and captures, so a captured plan does what an eager run does.
//
// Graphs are numbered from 0 in the order EndCapture returns them; a
// number is never reused while the session is open. Graphs belong to
// their session: several sessions on one backend each hold their own.

// capturer captures a session's work into CUDA graphs, and instantiates,
// launches, updates and destroys them. Temporaries become memory nodes,
// host steps host nodes. Updates go through cuGraphExecUpdate and fall
// back to a fresh instantiation when the driver refuses them (graphStats
// counts both).
type capturer struct {
	drv   *driver
	hold  *holdings
	host  *hostSide
	sub   *submitter
	tim   *timer
	colls *collectives
	ctl   *controller

	graphs []*graph // by number; nil once destroyed
	// uploads are a stream per device that instantiation uploads graphs
	// on and waits for: idle, so that the wait does not also wait for an
	// eager run still in flight on the stream a graph was captured on.
	uploads  map[*sessDevice]C.CUstream
	capture  *capture // the capture in progress, if any
	gstats   graphStats
	variants map[*dag.Op]*opState // C records of op variants that captured host nodes point at
}

// graph is a captured graph and, once instantiated, its executable.
type graph struct {
	tmpl   C.CUgraph
	exec   C.CUgraphExec
	dev    *sessDevice
	origin C.CUstream // the stream it was captured on
	// records is how many of its nodes CUPTI writes activity records for
	// (ops traced while captured whose work has them): a replay's records
	// have come once that many of its nodes have some.
	records int
}

// capture is a capture in progress.
type capture struct {
	origin  int
	event   C.CUevent  // forks the streams at the start, joins origin's device's streams at the end
	joins   []devEvent // joins the streams of the other devices (an event is recorded on its own device's streams)
	timing  bool       // se.tim.timing before the capture, restored after it
	records int        // ops traced while capturing whose work has activity records (graph.records)
	// temps holds the device temporaries' addresses before the capture.
	// A captured alloc returns an address of the graph's, which a failed
	// capture leaves behind in se.hold.bufs: EndCapture puts these back, so
	// that Close frees no address of a graph that was never made.
	temps []tempAddr
}

type tempAddr struct {
	buf  int
	dptr C.CUdeviceptr
}

// devEvent is an event of one device's context.
type devEvent struct {
	dev *sessDevice
	ev  C.CUevent
}

// graphStats counts the graph work a session has done since Open: its
// tests' view of captures and updates, beside executor.GraphStats.
type graphStats struct {
	Captures        int // EndCapture calls that made a graph
	Instantiations  int // executables made, first ones and re-instantiations
	UpdatesInPlace  int // UpdateGraph calls the driver applied to the executable
	UpdatesRefused  int // UpdateGraph calls that re-instantiated instead
	Launches        int
	LastUpdateError string // why the driver last refused an update in place
}

// stats returns what the session has counted of its graphs.
func (cpt *capturer) stats() graphStats { return cpt.gstats }

// graphsSupported reports why the driver cannot capture, if it cannot.
func (cpt *capturer) graphsSupported() error {
	a := cpt.drv.api
	if a.cuStreamBeginCapture == nil || a.cuStreamEndCapture == nil || a.cuGraphInstantiateWithFlags == nil ||
		a.cuGraphLaunch == nil || a.cuGraphExecDestroy == nil || a.cuGraphDestroy == nil {
		return fmt.Errorf("cuda: driver %s (CUDA %d) lacks the stream capture and graph entry points; update the NVIDIA driver, or run eagerly", cpt.drv.path, cpt.drv.version)
	}
	return nil
}

// BeginCapture does the work of Session.BeginCapture.
func (cpt *capturer) BeginCapture(origin int) error {
	if err := unopened(cpt.drv); err != nil { // faults.go
		return err
	}
	if err := cpt.graphsSupported(); err != nil {
		return err
	}
	if cpt.capture != nil {
		return fmt.Errorf("cuda: BeginCapture: stream %d is capturing already; call EndCapture first", cpt.capture.origin)
	}
	o, err := cpt.sub.stream(origin)
	if err != nil {
		return err
	}
	if err := cpt.colls.collCaptureReady(); err != nil {
		return fmt.Errorf("cuda: BeginCapture: %w", err)
	}
	if cpt.colls.heldOn != nil {
		if err := cpt.colls.flushP2P(nil, actNone); err != nil {
			return err
		}
	}
	if cpt.host.abandoned.Load() {
		if err := cpt.host.resume(); err != nil {
			return err
		}
	}
	e, err := cpt.drv.events.create(o.dev.ctx, false)
	if err != nil {
		return err
	}
	cpt.hold.track(&cpt.hold.live.Events, 1)
	c := &capture{origin: origin, event: e, timing: cpt.tim.timing}
	for i := range cpt.hold.bufs {
		if bs := &cpt.hold.bufs[i]; bs.b.Temporary && bs.b.Placement == dag.Device {
			c.temps = append(c.temps, tempAddr{buf: i, dptr: bs.dptr})
		}
	}
	for i := range cpt.sub.streams {
		if d := cpt.sub.streams[i].dev; d != o.dev && !slices.ContainsFunc(c.joins, func(j devEvent) bool { return j.dev == d }) {
			je, err := cpt.drv.events.create(d.ctx, false)
			if err != nil {
				cpt.dropCaptureEvent(c)
				return err
			}
			cpt.hold.track(&cpt.hold.live.Events, 1)
			c.joins = append(c.joins, devEvent{dev: d, ev: je})
		}
	}
	api, ctx := cpt.drv.api, o.dev.ctx
	if err := cpt.drv.check("cuStreamBeginCapture_v2", C.dr_capture_begin(api, ctx, o.h)); err != nil {
		cpt.dropCaptureEvent(c)
		return err
	}
	cpt.capture, cpt.tim.timing = c, false
	err = cpt.drv.check("cuEventRecord", C.dr_record(api, ctx, e, o.h))
	for i := range cpt.sub.streams {
		if s := &cpt.sub.streams[i]; i != origin && !cpt.ctl.bodyStreams[i] && err == nil {
			// A stream may wait for an event of another device; the
			// call is made in the stream's own context.
			err = cpt.drv.check("cuStreamWaitEvent", C.dr_wait(api, s.dev.ctx, s.h, e))
		}
	}
	if err != nil {
		if _, endErr := cpt.EndCapture(origin); endErr == nil {
			cpt.destroyLast()
		}
		return fmt.Errorf("cuda: forking the streams from origin stream %d: %w", origin, err)
	}
	return nil
}

// EndCapture does the work of Session.EndCapture.
func (cpt *capturer) EndCapture(origin int) (int, error) {
	c := cpt.capture
	if c == nil || c.origin != origin {
		return -1, fmt.Errorf("cuda: EndCapture: stream %d is not capturing", origin)
	}
	o := &cpt.sub.streams[origin]
	api, ctx := cpt.drv.api, o.dev.ctx
	joinErr := cpt.colls.flushP2P(nil, actNone)
	for i := range cpt.sub.streams {
		if i == origin || cpt.ctl.bodyStreams[i] || joinErr != nil {
			continue
		}
		s := &cpt.sub.streams[i]
		ev := c.event
		for _, j := range c.joins {
			if j.dev == s.dev {
				ev = j.ev
			}
		}
		joinErr = cpt.drv.check("cuEventRecord", C.dr_record(api, s.dev.ctx, ev, s.h))
		if joinErr == nil {
			joinErr = cpt.drv.check("cuStreamWaitEvent", C.dr_wait(api, ctx, o.h, ev))
		}
	}
	var tmpl C.CUgraph
	endErr := cpt.drv.check("cuStreamEndCapture", C.dr_capture_end(api, ctx, o.h, &tmpl))
	cpt.capture, cpt.tim.timing = nil, c.timing
	cpt.dropCaptureEvent(c)
	cpt.restoreTemps(c)
	if err := errors.Join(joinErr, endErr); err != nil {
		if tmpl != nil {
			C.dr_graph_destroy(api, ctx, tmpl)
		}
		return -1, fmt.Errorf("cuda: ending the capture on stream %d: %w", origin, err)
	}
	cpt.graphs = append(cpt.graphs, &graph{tmpl: tmpl, dev: o.dev, origin: o.h, records: c.records})
	cpt.hold.track(&cpt.hold.live.Graphs, 1)
	cpt.gstats.Captures++
	return len(cpt.graphs) - 1, nil
}

// restoreTemps puts back the temporaries' addresses from before capture
// c, and the count of live pool allocations with them: what a capture
// allocates belongs to its graph, freed with it.
func (cpt *capturer) restoreTemps(c *capture) {
	for _, t := range c.temps {
		bs := &cpt.hold.bufs[t.buf]
		switch {
		case bs.dptr == t.dptr:
			continue
		case t.dptr == 0:
			cpt.hold.track(&cpt.hold.live.PoolAllocs, -1)
		case bs.dptr == 0:
			cpt.hold.track(&cpt.hold.live.PoolAllocs, 1)
		}
		bs.dptr = t.dptr
	}
}

func (cpt *capturer) dropCaptureEvent(c *capture) {
	if c.event != nil {
		cpt.drv.events.destroy(cpt.sub.streams[c.origin].dev.ctx, c.event)
		c.event = nil
		cpt.hold.track(&cpt.hold.live.Events, -1)
	}
	for _, j := range c.joins {
		cpt.drv.events.destroy(j.dev.ctx, j.ev)
		cpt.hold.track(&cpt.hold.live.Events, -1)
	}
	c.joins = nil
}

// destroyLast destroys the graph EndCapture returned last.
func (cpt *capturer) destroyLast() {
	if n := len(cpt.graphs); n > 0 {
		cpt.DestroyGraph(n - 1)
	}
}

func (cpt *capturer) graph(i int) (*graph, error) {
	if i < 0 || i >= len(cpt.graphs) || cpt.graphs[i] == nil {
		return nil, fmt.Errorf("cuda: graph %d does not exist (destroyed, or never captured)", i)
	}
	return cpt.graphs[i], nil
}

// Instantiate does the work of Session.Instantiate.
func (cpt *capturer) Instantiate(gi int) error {
	g, err := cpt.graph(gi)
	if err != nil {
		return err
	}
	if g.exec != nil {
		return nil
	}
	return cpt.instantiate(g)
}

func (cpt *capturer) instantiate(g *graph) error {
	up, ok := cpt.uploads[g.dev]
	if !ok {
		var err error
		if up, err = cpt.drv.streams.create(g.dev.ctx, 0); err != nil {
			return err
		}
		cpt.hold.track(&cpt.hold.live.Streams, 1)
		if cpt.uploads == nil {
			cpt.uploads = map[*sessDevice]C.CUstream{}
		}
		cpt.uploads[g.dev] = up
	}
	var exec C.CUgraphExec
	if err := cpt.drv.check("cuGraphInstantiateWithFlags", C.dr_graph_instantiate(cpt.drv.api, g.dev.ctx, &exec, g.tmpl, up)); err != nil {
		return err
	}
	g.exec = exec
	cpt.hold.track(&cpt.hold.live.Graphs, 1)
	cpt.gstats.Instantiations++
	return nil
}

// LaunchGraph does the work of Session.LaunchGraph.
func (cpt *capturer) LaunchGraph(gi, si int) error {
	if gi < 0 || gi >= len(cpt.graphs) || cpt.graphs[gi] == nil || cpt.graphs[gi].exec == nil {
		return fmt.Errorf("cuda: graph %d is not instantiated", gi)
	}
	s, err := cpt.sub.stream(si)
	if err != nil {
		return err
	}
	if cpt.host.abandoned.Load() {
		if err := cpt.host.resume(); err != nil {
			return err
		}
	}
	g := cpt.graphs[gi]
	if err := cpt.colls.coll.copyLaunchable(cpt.tim.cupti != nil); err != nil {
		return err
	}
	if cpt.colls.heldOn != nil {
		if err := cpt.colls.flushP2P(nil, actNone); err != nil {
			return err
		}
	}
	// Under CUPTI the launch carries its number (gstats.Launches so far),
	// which ReplaySpans names the replay's spans by (timing.go).
	if cpt.tim.cupti != nil {
		if err := cpt.tim.cupti.launchTraced(cpt.drv, g, s, si, cpt.gstats.Launches); err != nil {
			return err
		}
	} else if err := cpt.drv.check("cuGraphLaunch", C.dr_graph_launch(cpt.drv.api, s.dev.ctx, g.exec, s.h)); err != nil {
		return err
	}
	s.last = "graph replay"
	cpt.gstats.Launches++
	return nil
}

// UpdateGraph does the work of Session.UpdateGraph.
func (cpt *capturer) UpdateGraph(gi, fresh int) (inPlace bool, err error) {
	g, err := cpt.graph(gi)
	if err != nil {
		return false, err
	}
	f, err := cpt.graph(fresh)
	if err != nil {
		return false, err
	}
	if gi == fresh || g.exec == nil || f.exec != nil {
		return false, fmt.Errorf("cuda: UpdateGraph(%d, %d): the first must be instantiated, the second freshly captured", gi, fresh)
	}
	api, ctx := cpt.drv.api, g.dev.ctx
	var why C.int
	r := C.dr_graph_exec_update(api, ctx, g.exec, f.tmpl, &why)
	if r == 0 {
		C.dr_graph_destroy(api, ctx, g.tmpl)
		g.tmpl, f.tmpl = f.tmpl, nil
		g.records = f.records
		cpt.graphs[fresh] = nil
		cpt.hold.track(&cpt.hold.live.Graphs, -1)
		cpt.gstats.UpdatesInPlace++
		return true, nil
	}
	cpt.gstats.UpdatesRefused++
	cpt.gstats.LastUpdateError = fmt.Sprintf("%v (CUgraphExecUpdateResult %d)", cpt.drv.check("cuGraphExecUpdate", r), int(why))
	if err := cpt.instantiate(f); err != nil {
		cpt.graphs[fresh] = nil
		cpt.releaseGraph(f)
		return false, fmt.Errorf("cuda: re-instantiating graph %d after the driver refused an update in place (%s): %w", gi, cpt.gstats.LastUpdateError, err)
	}
	old := *g
	*g = *f
	cpt.graphs[fresh] = nil
	cpt.releaseGraph(&old)
	return false, nil
}

// DestroyGraph does the work of Session.DestroyGraph.
func (cpt *capturer) DestroyGraph(gi int) error {
	g, err := cpt.graph(gi)
	if err != nil {
		return err
	}
	cpt.graphs[gi] = nil
	return cpt.releaseGraph(g)
}

func (cpt *capturer) releaseGraph(g *graph) error {
	api, ctx := cpt.drv.api, g.dev.ctx
	var errs []error
	if g.exec != nil {
		errs = append(errs, cpt.drv.check("cuGraphExecDestroy", C.dr_graph_exec_destroy(api, ctx, g.exec)))
		g.exec = nil
		cpt.hold.track(&cpt.hold.live.Graphs, -1)
	}
	if g.tmpl != nil {
		errs = append(errs, cpt.drv.check("cuGraphDestroy", C.dr_graph_destroy(api, ctx, g.tmpl)))
		g.tmpl = nil
		cpt.hold.track(&cpt.hold.live.Graphs, -1)
	}
	return errors.Join(errs...)
}

// GraphNodes does the work of Session.GraphNodes.
func (cpt *capturer) GraphNodes(gi int) (int, error) {
	g, err := cpt.graph(gi)
	if err != nil {
		return 0, err
	}
	var n C.size_t
	if cpt.drv.api.cuGraphGetNodes == nil {
		return 0, errors.New("cuda: the driver lacks cuGraphGetNodes")
	}
	err = cpt.drv.check("cuGraphGetNodes", C.dr_graph_node_count(cpt.drv.api, g.dev.ctx, g.tmpl, &n))
	return int(n), err
}

// closeGraphs ends a capture left open and releases every graph; Close
// calls it before it destroys the streams.
func (cpt *capturer) closeGraphs(keep func(error)) {
	if c := cpt.capture; c != nil {
		if gi, err := cpt.EndCapture(c.origin); err == nil {
			keep(cpt.DestroyGraph(gi))
		}
	}
	for i, g := range cpt.graphs {
		if g != nil {
			keep(cpt.releaseGraph(g))
			cpt.graphs[i] = nil
		}
	}
	cpt.graphs = nil
	for d, up := range cpt.uploads {
		keep(cpt.drv.streams.destroy(d.ctx, up))
		cpt.hold.track(&cpt.hold.live.Streams, -1)
	}
	cpt.uploads = nil
}

// rawGraph is workload C or E captured directly with the driver (one C
// call: fork, rounds x streams launches, join), instantiated: the floor
// that replays of captured plans are compared with.
type rawGraph struct {
	r    *rawLoop
	tmpl C.CUgraph
	exec C.CUgraphExec
}

func newRawGraph(r *rawLoop, rounds int) (*rawGraph, error) {
	api, ctx := r.b.drv.api, r.d.ctx
	g := &rawGraph{r: r}
	if err := r.b.drv.check("cuStreamEndCapture", C.dr_raw_graph(api, ctx, r.launch, r.streams, C.int(r.n), C.int(rounds), r.event, &g.tmpl)); err != nil {
		return nil, err
	}
	if err := r.b.drv.check("cuGraphInstantiateWithFlags", C.dr_graph_instantiate(api, ctx, &g.exec, g.tmpl, *r.streams)); err != nil {
		C.dr_graph_destroy(api, ctx, g.tmpl)
		return nil, err
	}
	return g, nil
}

// buildRaw captures (explicit false) or builds node by node (explicit
// true) the raw graph of rounds launches on each of r's streams, without
// instantiating it, and destroys it: the cost of making the graph.
func (r *rawLoop) buildRaw(rounds int, explicit bool) error {
	api, ctx := r.b.drv.api, r.d.ctx
	var tmpl C.CUgraph
	var rc C.CUresult
	call := "cuStreamEndCapture"
	if explicit {
		call = "cuGraphAddKernelNode"
		rc = C.dr_raw_graph_explicit(api, ctx, r.launch, C.int(r.n), C.int(rounds), &tmpl)
	} else {
		rc = C.dr_raw_graph(api, ctx, r.launch, r.streams, C.int(r.n), C.int(rounds), r.event, &tmpl)
	}
	if err := r.b.drv.check(call, rc); err != nil {
		return err
	}
	return r.b.drv.check("cuGraphDestroy", C.dr_graph_destroy(api, ctx, tmpl))
}

// launches replays the graph n times back to back on its origin stream and
// waits for them, from one C loop.
func (g *rawGraph) launches(n int) error {
	return g.r.b.drv.check("cuGraphLaunch", C.dr_raw_graph_launches(g.r.b.drv.api, g.r.d.ctx, g.exec, *g.r.streams, C.int(n)))
}

// rawLaunches launches the session's last instantiated graph n times on
// its origin stream and waits, from one C loop: the floor of a replay of
// the same graph, without the executor (benchmarks).
func (cpt *capturer) rawLaunches(n int) error {
	if len(cpt.graphs) == 0 || cpt.graphs[len(cpt.graphs)-1].exec == nil {
		return errors.New("cuda: no instantiated graph")
	}
	g := cpt.graphs[len(cpt.graphs)-1]
	return cpt.drv.check("cuGraphLaunch", C.dr_raw_graph_launches(cpt.drv.api, g.dev.ctx, g.exec, g.origin, C.int(n)))
}

func (g *rawGraph) close() {
	api, ctx := g.r.b.drv.api, g.r.d.ctx
	C.dr_graph_exec_destroy(api, ctx, g.exec)
	C.dr_graph_destroy(api, ctx, g.tmpl)
}

// variant prepares op, a variant of the open graph's op of the same ID
// (the same kind, device and kernel, with other scalar arguments or other
// buffers of the graph in the same places), as captures submit it after
// executor.SetArg or executor.Rebind. Host work and host steps keep their
// C records, which captured host nodes point at, until Close; a variant
// submitted again reuses them.
func (cpt *capturer) variant(op *dag.Op) (*opState, error) {
	if st := cpt.variants[op]; st != nil {
		return st, nil
	}
	orig := cpt.sub.ops[opSlot(op)].op
	bad := func(why string) error {
		return fmt.Errorf("cuda: op %q is neither op %d of the open graph (%q) nor a variant of it: %s", op.Name, op.ID, orig.Name, why)
	}
	if op.Kind != orig.Kind || op.Device != orig.Device || len(op.Access) != len(orig.Access) {
		return nil, bad("its kind, device or number of accesses differs")
	}
	for i, a := range op.Access {
		o := orig.Access[i].Buf
		switch {
		case a.Buf == nil || a.Buf.ID < 0 || a.Buf.ID >= len(cpt.hold.bufs) || cpt.hold.bufs[a.Buf.ID].b != a.Buf:
			return nil, bad(fmt.Sprintf("access %d is to a buffer the open graph does not hold", i))
		case a.Buf.Placement != o.Placement || (o.Placement == dag.Device && a.Buf.Device != o.Device) || a.Buf.Temporary != o.Temporary:
			return nil, bad(fmt.Sprintf("access %d is to %s, which is not placed like %s", i, a.Buf.Name, o.Name))
		case a.Offset < 0 || a.Size < 0 || a.End() > a.Buf.Size:
			return nil, bad(fmt.Sprintf("access %d (%v) lies outside %s", i, a.View, a.Buf.Name))
		}
	}
	if k := orig.Kernel(); k != nil && (op.Kernel() != k || len(op.Launch.Args) != len(orig.Launch.Args)) {
		return nil, bad("it launches another kernel, or with another number of arguments")
	}
	st := &opState{}
	if err := cpt.sub.prepare(st, op); err != nil {
		cpt.dropVariant(st)
		return nil, err
	}
	if o := cpt.sub.ops[opSlot(op)].launch; o != nil && st.launch != nil {
		st.launch.early = o.early // the op's place in the plan, and so its launch, is the original's (pdl.go)
	}
	if st.work != nil || st.act == actHostFunc {
		if cpt.variants == nil {
			cpt.variants = map[*dag.Op]*opState{}
		}
		cpt.variants[op] = st
	}
	return st, nil
}

// dropVariant frees the C records of a variant.
func (cpt *capturer) dropVariant(st *opState) {
	if st.launch != nil {
		C.free(unsafe.Pointer(st.launch))
		st.launch = nil
		cpt.hold.track(&cpt.hold.live.HostAllocs, -1)
	}
	if st.work != nil {
		C.free(unsafe.Pointer(st.work))
		st.work = nil
		cpt.hold.track(&cpt.hold.live.HostAllocs, -1)
	}
	if st.act == actHostFunc && st.handle != 0 {
		st.handle.Delete()
		st.handle = 0
		cpt.hold.track(&cpt.hold.live.Callbacks, -1)
	}
}

// dropVariants frees the C records of op variants (Close).
func (cpt *capturer) dropVariants() {
	for _, st := range cpt.variants {
		cpt.dropVariant(st)
	}
	cpt.variants = nil
}
