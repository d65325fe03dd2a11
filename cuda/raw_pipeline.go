package cuda

/*
#include <stdlib.h>
#include "cuda.h"

// p_raw_pipeline_graph captures the pipeline a hand-written program issues
// on three streams, as a programmer who overlaps copies with compute
// writes it: s0 on device 0 (context c0), and on device 1 (context c1) sc
// for the copies and s1 for the kernels. For each micro-batch i: launch
// k0[i] on s0 and record ev[i]; sc waits for it, copies n[i] bytes from
// src[i] to dst[i] (cuMemcpyAsync, as capture takes a copy between
// devices) and records evc[i]; s1 waits for that and launches k1[i]. sc
// and s1 are forked from s0 with fork and joined back with join[0..1]; the
// graph is instantiated into *e. No waits beyond those the data needs.
static CUresult p_raw_pipeline_graph(dr_api* a, CUcontext c0, CUstream s0, CUcontext c1, CUstream sc, CUstream s1, int k,
                                     dr_launch** k0, dr_launch** k1, CUdeviceptr* dst, CUdeviceptr* src, size_t* n, CUevent fork,
                                     CUevent* join, CUevent* ev, CUevent* evc, CUgraphExec* e) {
	CUresult r;
	CUgraph g = NULL;
	if ((r = dr_capture_begin(a, c0, s0)) != 0) return r;
	r = a->cuEventRecord(fork, s0);
	if (r == 0) r = dr_wait(a, c1, sc, fork);
	if (r == 0) r = dr_wait(a, c1, s1, fork);
	for (int i = 0; i < k && r == 0; i++) {
		r = dr_launch_kernel(a, c0, k0[i], s0);
		if (r == 0) r = a->cuEventRecord(ev[i], s0);
		if (r == 0) r = dr_wait(a, c1, sc, ev[i]);
		if (r == 0) r = a->cuMemcpyAsync(dst[i], src[i], n[i], sc);
		if (r == 0) r = a->cuEventRecord(evc[i], sc);
		if (r == 0) r = a->cuStreamWaitEvent(s1, evc[i], 0);
		if (r == 0) r = dr_launch_kernel(a, c1, k1[i], s1);
	}
	if (r == 0) r = dr_record(a, c1, join[0], sc);
	if (r == 0) r = dr_record(a, c1, join[1], s1);
	if (r == 0) r = dr_wait(a, c0, s0, join[0]);
	if (r == 0) r = dr_wait(a, c0, s0, join[1]);
	CUresult re = dr_capture_end(a, c0, s0, &g);
	if (r == 0) r = re;
	if (r == 0) r = dr_graph_instantiate(a, c0, e, g, s0);
	if (g != NULL) dr_graph_destroy(a, c0, g);
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

import "errors"

// rawStage is one micro-batch of a hand-written two-device pipeline: a
// kernel on device 0, a copy of its result to device 1, a kernel there.
type rawStage struct {
	k0, k1   *C.dr_launch
	dst, src C.CUdeviceptr
	n        int64
}

// rawPipeline is a two-device pipeline captured by hand, as the floor of
// a captured dagrun plan of the same work.
type rawPipeline struct {
	d          *driver
	c0, c1     C.CUcontext
	s0, sc, s1 C.CUstream
	exec       C.CUgraphExec
	events     []rawEvent
}

type rawEvent struct {
	c C.CUcontext
	e C.CUevent
}

// newRawPipeline captures stages on streams of its own, s0 in context c0
// (device 0), sc and s1 in c1 (device 1), and instantiates the graph.
func (d *driver) newRawPipeline(c0, c1 C.CUcontext, stages []rawStage) (p *rawPipeline, err error) {
	if len(stages) == 0 {
		return nil, errors.New("a raw pipeline needs a stage")
	}
	p = &rawPipeline{d: d, c0: c0, c1: c1}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.s0, err = d.streams.create(c0, 0); err != nil {
		return nil, err
	}
	if p.sc, err = d.streams.create(c1, 0); err != nil {
		return nil, err
	}
	if p.s1, err = d.streams.create(c1, 0); err != nil {
		return nil, err
	}
	event := func(c C.CUcontext) (C.CUevent, error) {
		e, err := d.events.create(c, false)
		if err == nil {
			p.events = append(p.events, rawEvent{c: c, e: e})
		}
		return e, err
	}
	// Go memory that holds no Go pointers: C may read it during the call.
	k := len(stages)
	k0, k1 := make([]*C.dr_launch, k), make([]*C.dr_launch, k)
	dst, src, n := make([]C.CUdeviceptr, k), make([]C.CUdeviceptr, k), make([]C.size_t, k)
	ev, evc := make([]C.CUevent, k), make([]C.CUevent, k)
	for i, st := range stages {
		k0[i], k1[i], dst[i], src[i], n[i] = st.k0, st.k1, st.dst, st.src, C.size_t(st.n)
		if ev[i], err = event(c0); err != nil {
			return nil, err
		}
		if evc[i], err = event(c1); err != nil {
			return nil, err
		}
	}
	fork, err := event(c0)
	if err != nil {
		return nil, err
	}
	join := make([]C.CUevent, 2)
	for i := range join {
		if join[i], err = event(c1); err != nil {
			return nil, err
		}
	}
	if err := d.check("raw pipeline capture", C.p_raw_pipeline_graph(d.api, c0, p.s0, c1, p.sc, p.s1, C.int(k), &k0[0], &k1[0],
		&dst[0], &src[0], &n[0], fork, &join[0], &ev[0], &evc[0], &p.exec)); err != nil {
		return nil, err
	}
	return p, nil
}

// replays launches the graph reps times back to back and waits for them.
func (p *rawPipeline) replays(reps int) error {
	return p.d.check("cuGraphLaunch", C.p_raw_replays(p.d.api, p.c0, p.exec, p.s0, C.int(reps)))
}

func (p *rawPipeline) close() {
	if p.exec != nil {
		C.dr_graph_exec_destroy(p.d.api, p.c0, p.exec)
	}
	for _, e := range p.events {
		p.d.events.destroy(e.c, e.e)
	}
	if p.s0 != nil {
		p.d.streams.destroy(p.c0, p.s0)
	}
	for _, s := range []C.CUstream{p.sc, p.s1} {
		if s != nil {
			p.d.streams.destroy(p.c1, s)
		}
	}
}
