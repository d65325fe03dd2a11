package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// Sampled loops. CUPTI records a kernel at a cost to the device of about
// 2.4 us (a loop of 10 empty kernels ran 3x slower recorded), and decides
// at each launch whether the work launched is recorded. So under CUPTI an
// eager run of a While runs in two graphs of its own: the first stops the
// loop after sampleIterations iterations, launched recorded; the second
// resumes it, with the flag and count it left (dr_cond_enter's resume),
// launched with the process's records of device work off, and then
// dr_cond_exit ends the op's span as a recorded eager launch. The trace
// has the sample's iterations op by op, and the loop's span and count
// (read from its state at Sync) cover all of them. A graph once launched
// recorded stays slow when launched unrecorded, so the two are never the
// same graph. Records are off for the process while the rest launches:
// only one session holds CUPTI's sink at a time, and it submits from one
// goroutine, so the records lost are only those of sessions that are not
// traced. scripts/gpu/cupti_loop_raw.cu does the same by hand. A traced
// run of 1000 iterations costs 1.12-1.14x an untraced one in a process of
// its own (an H200), but 1.3x in a process that ran the loop before CUPTI
// attached: there the unrecorded rest runs 1.25x slower, for reasons of
// CUPTI's own (BENCHMARKS.md lists what was ruled out).

// sampleIterations is how many iterations of a traced eager run of a loop
// are recorded op by op.
const sampleIterations = 8

// sampleRole is what a capture of a While's eager graph runs.
type sampleRole uint8

const (
	roleWhole  sampleRole = iota // the whole loop
	roleSample                   // its first sampleIterations iterations
	roleRest                     // the others, resumed
)

// setArgs writes the role's resume and pause into c's launches, which
// lower captures next.
func (r sampleRole) setArgs(c *control) {
	var pause, resume C.uint64_t
	switch r {
	case roleSample:
		pause = sampleIterations
	case roleRest:
		resume = 1
	}
	if c.state == 0 {
		return // an If: no iterations
	}
	unsafe.Slice(c.enter.slots, c.enter.nslots)[3] = resume
	if c.next != nil {
		unsafe.Slice(c.next.slots, c.next.nslots)[4] = pause
	}
	if c.setFlag != nil {
		unsafe.Slice(c.setFlag.slots, c.setFlag.nslots)[setFlagSlots+3] = pause
	}
}

// sampling is what a control keeps of its sampled runs.
type sampling struct {
	role     sampleRole    // of the capture in progress
	restTmpl C.CUgraph     // the rest's graph, and its executable: nil
	rest     C.CUgraphExec // where runs are not sampled
	// sampled says the last run was, and its count is to be read;
	// counted that iterations is that count, not yet reported.
	sampled, counted bool
	iterations       uint64
}

// count notes n, a loop's count read after a run, where the run was
// sampled.
func (s *sampling) count(n uint64) {
	if s.sampled {
		s.iterations, s.counted, s.sampled = n, true, false
	}
}

// samples reports whether c's eager runs are sampled: a While that may
// run more than sampleIterations iterations, traced op by op by CUPTI.
func (ct *controller) samples(c *control) bool {
	m := c.op.Control.Max
	return ct.exits() && c.state != 0 && c.op.Kind.Info().Body == dag.Loop && (m == 0 || m > sampleIterations)
}

// runSampled enqueues a sampled run of c on s: the sample recorded, the
// rest not, then the exit that ends the op's span.
func (ct *controller) runSampled(s *stream, c *control) error {
	api, ctx := ct.drv.api, c.dev.ctx
	if err := ct.drv.check("cuGraphLaunch", C.dr_graph_launch(api, ctx, c.exec, s.h)); err != nil {
		return err
	}
	tr := ct.tim.cupti.tr
	if err := tr.recordDevice(false); err != nil {
		return errors.Join(err, tr.recordDevice(true))
	}
	err := ct.drv.check("cuGraphLaunch", C.dr_graph_launch(api, ctx, c.rest, s.h))
	if err = errors.Join(err, tr.recordDevice(true)); err != nil {
		return err
	}
	if err := ct.drv.check("cuLaunchKernel", C.dr_launch_kernel(api, ctx, c.exit, s.h)); err != nil {
		return err
	}
	c.sampled = true
	return nil
}

// loopIterations does the work of Session.LoopIterations.
func (ct *controller) loopIterations(f func(op, iterations int)) {
	for _, c := range ct.controls {
		if c.counted {
			c.counted = false
			f(opSlot(c.op), int(c.iterations))
		}
	}
}
