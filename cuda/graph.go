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

// graph is a captured graph and, once instantiated, its executable.
type graph struct {
	tmpl   C.CUgraph
	exec   C.CUgraphExec
	dev    *sessDevice
	origin C.CUstream // the stream it was captured on; uploads go there
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
	timing  bool       // se.timing before the capture, restored after it
	records int        // ops traced while capturing whose work has activity records (graph.records)
	// temps holds the device temporaries' addresses before the capture.
	// A captured alloc returns an address of the graph's, which a failed
	// capture leaves behind in se.bufs: EndCapture puts these back, so
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

// GraphStats counts the graph work a session has done since Open.
type GraphStats struct {
	Captures        int // EndCapture calls that made a graph
	Instantiations  int // executables made, first ones and re-instantiations
	UpdatesInPlace  int // UpdateGraph calls the driver applied to the executable
	UpdatesRefused  int // UpdateGraph calls that re-instantiated instead
	Launches        int
	LastUpdateError string // why the driver last refused an update in place
}

// GraphStats returns what the session has counted of its graphs.
func (se *Session) GraphStats() GraphStats { return se.gstats }

// graphsSupported reports why the driver cannot capture, if it cannot.
func (se *Session) graphsSupported() error {
	a := se.drv.api
	if a.cuStreamBeginCapture == nil || a.cuStreamEndCapture == nil || a.cuGraphInstantiateWithFlags == nil ||
		a.cuGraphLaunch == nil || a.cuGraphExecDestroy == nil || a.cuGraphDestroy == nil {
		return fmt.Errorf("cuda: driver %s (CUDA %d) lacks the stream capture and graph entry points; update the NVIDIA driver, or run eagerly", se.drv.path, se.drv.version)
	}
	return nil
}

// BeginCapture starts capturing the work submitted to every stream: it
// begins a capture on stream origin and forks every other stream, of any
// device, from it with an event, so that one graph holds the work of every
// device the plan uses. Timing is off while capturing (a replay is timed
// as a whole, not per op). A session with collectives captures only once
// they have run eagerly (see collective.go).
func (se *Session) BeginCapture(origin int) error {
	if err := se.unopened(); err != nil { // faults.go
		return err
	}
	if err := se.graphsSupported(); err != nil {
		return err
	}
	if se.capture != nil {
		return fmt.Errorf("cuda: BeginCapture: stream %d is capturing already; call EndCapture first", se.capture.origin)
	}
	o, err := se.stream(origin)
	if err != nil {
		return err
	}
	if err := se.collCaptureReady(); err != nil {
		return fmt.Errorf("cuda: BeginCapture: %w", err)
	}
	if err := se.flushP2P(nil, actNone); err != nil {
		return err
	}
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return err
		}
	}
	e, err := se.drv.eventCreate(o.dev.ctx, false)
	if err != nil {
		return err
	}
	se.track(&se.live.Events, 1)
	c := &capture{origin: origin, event: e, timing: se.timing}
	for i := range se.bufs {
		if bs := &se.bufs[i]; bs.b.Temporary && bs.b.Placement == dag.Device {
			c.temps = append(c.temps, tempAddr{buf: i, dptr: bs.dptr})
		}
	}
	for i := range se.streams {
		if d := se.streams[i].dev; d != o.dev && !slices.ContainsFunc(c.joins, func(j devEvent) bool { return j.dev == d }) {
			je, err := se.drv.eventCreate(d.ctx, false)
			if err != nil {
				se.dropCaptureEvent(c)
				return err
			}
			se.track(&se.live.Events, 1)
			c.joins = append(c.joins, devEvent{dev: d, ev: je})
		}
	}
	api, ctx := se.drv.api, o.dev.ctx
	if err := se.drv.check("cuStreamBeginCapture_v2", C.dr_capture_begin(api, ctx, o.h)); err != nil {
		se.dropCaptureEvent(c)
		return err
	}
	se.capture, se.timing = c, false
	err = se.drv.check("cuEventRecord", C.dr_record(api, ctx, e, o.h))
	for i := range se.streams {
		if s := &se.streams[i]; i != origin && err == nil {
			// A stream may wait for an event of another device; the
			// call is made in the stream's own context.
			err = se.drv.check("cuStreamWaitEvent", C.dr_wait(api, s.dev.ctx, s.h, e))
		}
	}
	if err != nil {
		if _, endErr := se.EndCapture(origin); endErr == nil {
			se.destroyLast()
		}
		return fmt.Errorf("cuda: forking the streams from origin stream %d: %w", origin, err)
	}
	return nil
}

// EndCapture joins every stream back into origin and ends the capture,
// returning the captured graph's number. The graph is not launchable until
// Instantiate (or UpdateGraph, which instantiates it into another graph).
func (se *Session) EndCapture(origin int) (int, error) {
	c := se.capture
	if c == nil || c.origin != origin {
		return -1, fmt.Errorf("cuda: EndCapture: stream %d is not capturing", origin)
	}
	o := &se.streams[origin]
	api, ctx := se.drv.api, o.dev.ctx
	joinErr := se.flushP2P(nil, actNone)
	for i := range se.streams {
		if i == origin || joinErr != nil {
			continue
		}
		s := &se.streams[i]
		ev := c.event
		for _, j := range c.joins {
			if j.dev == s.dev {
				ev = j.ev
			}
		}
		joinErr = se.drv.check("cuEventRecord", C.dr_record(api, s.dev.ctx, ev, s.h))
		if joinErr == nil {
			joinErr = se.drv.check("cuStreamWaitEvent", C.dr_wait(api, ctx, o.h, ev))
		}
	}
	var tmpl C.CUgraph
	endErr := se.drv.check("cuStreamEndCapture", C.dr_capture_end(api, ctx, o.h, &tmpl))
	se.capture, se.timing = nil, c.timing
	se.dropCaptureEvent(c)
	se.restoreTemps(c)
	if err := errors.Join(joinErr, endErr); err != nil {
		if tmpl != nil {
			C.dr_graph_destroy(api, ctx, tmpl)
		}
		return -1, fmt.Errorf("cuda: ending the capture on stream %d: %w", origin, err)
	}
	se.graphs = append(se.graphs, &graph{tmpl: tmpl, dev: o.dev, origin: o.h, records: c.records})
	se.track(&se.live.Graphs, 1)
	se.gstats.Captures++
	return len(se.graphs) - 1, nil
}

// restoreTemps puts back the temporaries' addresses from before capture
// c, and the count of live pool allocations with them: what a capture
// allocates belongs to its graph, freed with it.
func (se *Session) restoreTemps(c *capture) {
	for _, t := range c.temps {
		bs := &se.bufs[t.buf]
		switch {
		case bs.dptr == t.dptr:
			continue
		case t.dptr == 0:
			se.track(&se.live.PoolAllocs, -1)
		case bs.dptr == 0:
			se.track(&se.live.PoolAllocs, 1)
		}
		bs.dptr = t.dptr
	}
}

func (se *Session) dropCaptureEvent(c *capture) {
	if c.event != nil {
		se.drv.eventDestroy(se.streams[c.origin].dev.ctx, c.event)
		c.event = nil
		se.track(&se.live.Events, -1)
	}
	for _, j := range c.joins {
		se.drv.eventDestroy(j.dev.ctx, j.ev)
		se.track(&se.live.Events, -1)
	}
	c.joins = nil
}

// destroyLast destroys the graph EndCapture returned last.
func (se *Session) destroyLast() {
	if n := len(se.graphs); n > 0 {
		se.DestroyGraph(n - 1)
	}
}

func (se *Session) graph(i int) (*graph, error) {
	if i < 0 || i >= len(se.graphs) || se.graphs[i] == nil {
		return nil, fmt.Errorf("cuda: graph %d does not exist (destroyed, or never captured)", i)
	}
	return se.graphs[i], nil
}

// Instantiate makes graph gi launchable and uploads it to its device, so
// that the first launch costs what later ones do.
func (se *Session) Instantiate(gi int) error {
	g, err := se.graph(gi)
	if err != nil {
		return err
	}
	if g.exec != nil {
		return nil
	}
	return se.instantiate(g)
}

func (se *Session) instantiate(g *graph) error {
	var exec C.CUgraphExec
	if err := se.drv.check("cuGraphInstantiateWithFlags", C.dr_graph_instantiate(se.drv.api, g.dev.ctx, &exec, g.tmpl, g.origin)); err != nil {
		return err
	}
	g.exec = exec
	se.track(&se.live.Graphs, 1)
	se.gstats.Instantiations++
	return nil
}

// LaunchGraph enqueues one replay of instantiated graph gi on stream si.
// Launches are numbered from 0 in the session (GraphStats.Launches before
// it): ReplaySpans names the spans of each replay by that number.
func (se *Session) LaunchGraph(gi, si int) error {
	if gi < 0 || gi >= len(se.graphs) || se.graphs[gi] == nil || se.graphs[gi].exec == nil {
		return fmt.Errorf("cuda: graph %d is not instantiated", gi)
	}
	s, err := se.stream(si)
	if err != nil {
		return err
	}
	if se.abandoned.Load() {
		if err := se.resume(); err != nil {
			return err
		}
	}
	g := se.graphs[gi]
	if err := se.flushP2P(nil, actNone); err != nil {
		return err
	}
	// Under CUPTI the launch carries its number (gstats.Launches so far),
	// which ReplaySpans names the replay's spans by (timing.go).
	if se.cupti != nil {
		if err := se.launchTraced(g, s, si, se.gstats.Launches); err != nil {
			return err
		}
	} else if err := se.drv.check("cuGraphLaunch", C.dr_graph_launch(se.drv.api, s.dev.ctx, g.exec, s.h)); err != nil {
		return err
	}
	s.last = "graph replay"
	se.gstats.Launches++
	return nil
}

// UpdateGraph makes instantiated graph gi do what captured graph fresh
// does: in place (cuGraphExecUpdate) when the driver can apply the change,
// which keeps the executable; otherwise by instantiating fresh in its
// place. Either way fresh is used up. It reports whether the update was in
// place. Call it when gi's launches are done.
func (se *Session) UpdateGraph(gi, fresh int) (inPlace bool, err error) {
	g, err := se.graph(gi)
	if err != nil {
		return false, err
	}
	f, err := se.graph(fresh)
	if err != nil {
		return false, err
	}
	if gi == fresh || g.exec == nil || f.exec != nil {
		return false, fmt.Errorf("cuda: UpdateGraph(%d, %d): the first must be instantiated, the second freshly captured", gi, fresh)
	}
	api, ctx := se.drv.api, g.dev.ctx
	var why C.int
	r := C.dr_graph_exec_update(api, ctx, g.exec, f.tmpl, &why)
	if r == 0 {
		C.dr_graph_destroy(api, ctx, g.tmpl)
		g.tmpl, f.tmpl = f.tmpl, nil
		g.records = f.records
		se.graphs[fresh] = nil
		se.track(&se.live.Graphs, -1)
		se.gstats.UpdatesInPlace++
		return true, nil
	}
	se.gstats.UpdatesRefused++
	se.gstats.LastUpdateError = fmt.Sprintf("%v (CUgraphExecUpdateResult %d)", se.drv.check("cuGraphExecUpdate", r), int(why))
	if err := se.instantiate(f); err != nil {
		se.graphs[fresh] = nil
		se.releaseGraph(f)
		return false, fmt.Errorf("cuda: re-instantiating graph %d after the driver refused an update in place (%s): %w", gi, se.gstats.LastUpdateError, err)
	}
	old := *g
	*g = *f
	se.graphs[fresh] = nil
	se.releaseGraph(&old)
	return false, nil
}

// DestroyGraph releases graph gi: its executable and its captured graph.
func (se *Session) DestroyGraph(gi int) error {
	g, err := se.graph(gi)
	if err != nil {
		return err
	}
	se.graphs[gi] = nil
	return se.releaseGraph(g)
}

func (se *Session) releaseGraph(g *graph) error {
	api, ctx := se.drv.api, g.dev.ctx
	var errs []error
	if g.exec != nil {
		errs = append(errs, se.drv.check("cuGraphExecDestroy", C.dr_graph_exec_destroy(api, ctx, g.exec)))
		g.exec = nil
		se.track(&se.live.Graphs, -1)
	}
	if g.tmpl != nil {
		errs = append(errs, se.drv.check("cuGraphDestroy", C.dr_graph_destroy(api, ctx, g.tmpl)))
		g.tmpl = nil
		se.track(&se.live.Graphs, -1)
	}
	return errors.Join(errs...)
}

// GraphNodes is the number of nodes of captured graph gi.
func (se *Session) GraphNodes(gi int) (int, error) {
	g, err := se.graph(gi)
	if err != nil {
		return 0, err
	}
	var n C.size_t
	if se.drv.api.cuGraphGetNodes == nil {
		return 0, errors.New("cuda: the driver lacks cuGraphGetNodes")
	}
	err = se.drv.check("cuGraphGetNodes", C.dr_graph_node_count(se.drv.api, g.dev.ctx, g.tmpl, &n))
	return int(n), err
}

// closeGraphs ends a capture left open and releases every graph; Close
// calls it before it destroys the streams.
func (se *Session) closeGraphs(keep func(error)) {
	if c := se.capture; c != nil {
		if gi, err := se.EndCapture(c.origin); err == nil {
			keep(se.DestroyGraph(gi))
		}
	}
	for i, g := range se.graphs {
		if g != nil {
			keep(se.releaseGraph(g))
			se.graphs[i] = nil
		}
	}
	se.graphs = nil
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
func (se *Session) variant(op *dag.Op) (*opState, error) {
	if st := se.variants[op]; st != nil {
		return st, nil
	}
	orig := se.ops[op.ID].op
	bad := func(why string) error {
		return fmt.Errorf("cuda: op %q is neither op %d of the open graph (%q) nor a variant of it: %s", op.Name, op.ID, orig.Name, why)
	}
	if op.Kind != orig.Kind || op.Device != orig.Device || len(op.Access) != len(orig.Access) {
		return nil, bad("its kind, device or number of accesses differs")
	}
	for i, a := range op.Access {
		o := orig.Access[i].Buf
		switch {
		case a.Buf == nil || a.Buf.ID < 0 || a.Buf.ID >= len(se.bufs) || se.bufs[a.Buf.ID].b != a.Buf:
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
	if err := se.prepare(st, op); err != nil {
		se.dropVariant(st)
		return nil, err
	}
	if st.work != nil || st.act == actHostFunc {
		if se.variants == nil {
			se.variants = map[*dag.Op]*opState{}
		}
		se.variants[op] = st
	}
	return st, nil
}

// dropVariant frees the C records of a variant.
func (se *Session) dropVariant(st *opState) {
	if st.launch != nil {
		C.free(unsafe.Pointer(st.launch))
		st.launch = nil
		se.track(&se.live.HostAllocs, -1)
	}
	if st.work != nil {
		C.free(unsafe.Pointer(st.work))
		st.work = nil
		se.track(&se.live.HostAllocs, -1)
	}
	if st.act == actHostFunc && st.handle != 0 {
		st.handle.Delete()
		st.handle = 0
		se.track(&se.live.Callbacks, -1)
	}
}
