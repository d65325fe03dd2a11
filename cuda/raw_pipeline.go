package cuda

/*
#include <stdlib.h>
#include "cuda.h"

// p_raw_pipeline_graph captures the pipeline a hand-written program issues
// across d devices, as a programmer who overlaps copies with compute
// writes it: device j (context c[j]) has a kernel stream s[j] and, past
// the first, a copy stream sc[j]. Micro-batch i (of k) launches kern[i] on
// s[0] and records ev[i]; then for each later device j, at x = j*k + i:
// sc[j] waits for ev[x-k], copies n[x] bytes from src[x] to dst[x]
// (cuMemcpyAsync, as capture takes a copy between devices) and records
// evc[x]; s[j] waits for that, launches kern[x] and records ev[x]. The
// streams are forked from s[0] with fork and joined back with join[2j]
// and join[2j+1]; the graph is instantiated into *e. No waits beyond those
// the data needs.
static CUresult p_raw_pipeline_graph(dr_api* a, int d, int k, CUcontext* c, CUstream* s, CUstream* sc, dr_launch** kern,
                                     CUdeviceptr* dst, CUdeviceptr* src, size_t* n, CUevent fork, CUevent* join,
                                     CUevent* ev, CUevent* evc, CUgraphExec* e) {
	CUresult r;
	CUgraph g = NULL;
	if ((r = dr_capture_begin(a, c[0], s[0])) != 0) return r;
	r = dr_record(a, c[0], fork, s[0]);
	for (int j = 1; j < d && r == 0; j++) {
		r = dr_wait(a, c[j], sc[j], fork);
		if (r == 0) r = dr_wait(a, c[j], s[j], fork);
	}
	for (int i = 0; i < k && r == 0; i++) {
		r = dr_launch_kernel(a, c[0], kern[i], s[0]);
		if (r == 0) r = dr_record(a, c[0], ev[i], s[0]);
		for (int j = 1; j < d && r == 0; j++) {
			int x = j * k + i;
			r = dr_wait(a, c[j], sc[j], ev[x - k]);
			if (r == 0) r = a->cuMemcpyAsync(dst[x], src[x], n[x], sc[j]);
			if (r == 0) r = dr_record(a, c[j], evc[x], sc[j]);
			if (r == 0) r = dr_wait(a, c[j], s[j], evc[x]);
			if (r == 0) r = dr_launch_kernel(a, c[j], kern[x], s[j]);
			if (r == 0) r = dr_record(a, c[j], ev[x], s[j]);
		}
	}
	for (int j = 1; j < d && r == 0; j++) {
		r = dr_record(a, c[j], join[2 * j], sc[j]);
		if (r == 0) r = dr_record(a, c[j], join[2 * j + 1], s[j]);
		if (r == 0) r = dr_wait(a, c[0], s[0], join[2 * j]);
		if (r == 0) r = dr_wait(a, c[0], s[0], join[2 * j + 1]);
	}
	CUresult re = dr_capture_end(a, c[0], s[0], &g);
	if (r == 0) r = re;
	if (r == 0) r = dr_graph_instantiate(a, c[0], e, g, s[0]);
	if (g != NULL) dr_graph_destroy(a, c[0], g);
	return r;
}

// p_raw_replays launches e on s reps times back to back and synchronises s.
static CUresult p_raw_replays(dr_api* a, CUcontext c, CUgraphExec e, CUstream s, int reps) {
	CUresult r = dr_ctx(a, c);
	for (int i = 0; i < reps && r == 0; i++) r = a->cuGraphLaunch(e, s);
	return r != 0 ? r : a->cuStreamSynchronize(s);
}
*/
import "C"

import (
	"errors"
	"fmt"
)

// rawStep is one micro-batch's work on one device of a hand-written
// pipeline: a copy of the previous device's result into this one (none on
// the first device), then a kernel.
type rawStep struct {
	kernel   *C.dr_launch
	dst, src C.CUdeviceptr
	n        int64
}

// rawPipeline is a pipeline across devices captured by hand, as the floor
// of a captured dagrun plan of the same work.
type rawPipeline struct {
	d       *driver
	ctxs    []C.CUcontext
	streams []rawStream
	exec    C.CUgraphExec
	events  []rawEvent
}

type rawStream struct {
	c C.CUcontext
	s C.CUstream
}

type rawEvent struct {
	c C.CUcontext
	e C.CUevent
}

// newRawPipeline captures steps[j][i] (device j, micro-batch i; ctxs[j] is
// device j's context) on streams of its own and instantiates the graph.
func (d *driver) newRawPipeline(ctxs []C.CUcontext, steps [][]rawStep) (p *rawPipeline, err error) {
	nd := len(ctxs)
	if nd < 2 || len(steps) != nd || len(steps[0]) == 0 {
		return nil, errors.New("a raw pipeline needs 2 devices or more and a micro-batch")
	}
	k := len(steps[0])
	for j, st := range steps {
		if len(st) != k {
			return nil, fmt.Errorf("device %d has %d micro-batches, device 0 has %d", j, len(st), k)
		}
	}
	p = &rawPipeline{d: d, ctxs: ctxs}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	stream := func(c C.CUcontext) (C.CUstream, error) {
		s, err := d.streams.create(c, 0)
		if err == nil {
			p.streams = append(p.streams, rawStream{c: c, s: s})
		}
		return s, err
	}
	event := func(c C.CUcontext) (C.CUevent, error) {
		e, err := d.events.create(c, false)
		if err == nil {
			p.events = append(p.events, rawEvent{c: c, e: e})
		}
		return e, err
	}
	// Go memory that holds no Go pointers: C may read it during the call.
	cs := make([]C.CUcontext, nd)
	ks, cps := make([]C.CUstream, nd), make([]C.CUstream, nd)
	kern := make([]*C.dr_launch, nd*k)
	dst, src, n := make([]C.CUdeviceptr, nd*k), make([]C.CUdeviceptr, nd*k), make([]C.size_t, nd*k)
	ev, evc := make([]C.CUevent, nd*k), make([]C.CUevent, nd*k)
	join := make([]C.CUevent, 2*nd)
	for j, c := range ctxs {
		cs[j] = c
		if ks[j], err = stream(c); err != nil {
			return nil, err
		}
		if j > 0 {
			if cps[j], err = stream(c); err != nil {
				return nil, err
			}
			for h := 2 * j; h < 2*j+2; h++ {
				if join[h], err = event(c); err != nil {
					return nil, err
				}
			}
		}
		for i, st := range steps[j] {
			x := j*k + i
			kern[x], dst[x], src[x], n[x] = st.kernel, st.dst, st.src, C.size_t(st.n)
			if ev[x], err = event(c); err != nil {
				return nil, err
			}
			if evc[x], err = event(c); err != nil {
				return nil, err
			}
		}
	}
	fork, err := event(ctxs[0])
	if err != nil {
		return nil, err
	}
	if err := d.check("raw pipeline capture", C.p_raw_pipeline_graph(d.api, C.int(nd), C.int(k), &cs[0], &ks[0], &cps[0], &kern[0],
		&dst[0], &src[0], &n[0], fork, &join[0], &ev[0], &evc[0], &p.exec)); err != nil {
		return nil, err
	}
	return p, nil
}

// replays launches the graph reps times back to back on the first
// device's kernel stream and waits for them.
func (p *rawPipeline) replays(reps int) error {
	return p.d.check("cuGraphLaunch", C.p_raw_replays(p.d.api, p.ctxs[0], p.exec, p.streams[0].s, C.int(reps)))
}

func (p *rawPipeline) close() {
	if p.exec != nil {
		C.dr_graph_exec_destroy(p.d.api, p.ctxs[0], p.exec)
	}
	for _, e := range p.events {
		p.d.events.destroy(e.c, e.e)
	}
	for _, s := range p.streams {
		p.d.streams.destroy(s.c, s.s)
	}
}
