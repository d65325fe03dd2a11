package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// ctxCheckEvery is how many steps a submission takes between looks at its
// context: often enough to stop within microseconds, rarely enough to cost
// nothing per step.
const ctxCheckEvery = 256

// submitter submits a plan's steps to a device session, for an eager run
// or into a capture: step by step, or in stretches where the session takes
// many steps in one call, with faults injected before ops, and each call
// timed on the host where that was asked for.
type submitter struct {
	d       device.Session
	p       *planner.Plan
	closed  *atomic.Bool  // the session's: Close from another goroutine stops a submission
	faults  *injector     // faults.go; nil without fault injection
	timer   *submitTimer  // nil unless submission timing was asked for (profile.go)
	stretch []device.Step // submitStretches' steps, reused
}

// submit enqueues the plan's steps in order, with ops[i] for op i, and
// looks at ctx every ctxCheckEvery steps. A failed step's error names its
// op; verb says what the submission is for, in the error of a stop.
func (b *submitter) submit(ctx context.Context, ops []*dag.Op, verb string) error {
	// One OS thread submits the whole run: CUPTI keeps its activity buffers
	// and pushed ids per thread, and a run spread over threads would pay
	// for a buffer on each.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A session that takes many steps in one call gets them in stretches
	// of ctxCheckEvery, unless faults are injected before ops.
	if sub, ok := b.d.(device.Submitter); ok && b.faults == nil {
		return b.submitStretches(ctx, sub, ops, verb)
	}
	steps, calls := b.p.Steps, b.calls()
	for i := range steps {
		st := &steps[i]
		var err error
		switch st.Kind {
		case planner.Run:
			if b.closed.Load() { // Close from another goroutine: stop submitting
				return fmt.Errorf("executor: %s stopped after %d of %d steps: the session was %w", verb, i, len(steps), device.ErrClosed)
			}
			var failed bool
			if verb == "run" { // faults.go: eager runs only
				failed, err = b.faults.before(int(st.Stream), ops[st.Op])
			}
			if failed { // faults.go: nothing after an injected failure is submitted
				return nil
			}
			if err == nil {
				err = calls.Run(int(st.Stream), ops[st.Op])
			}
		case planner.Record:
			err = calls.Record(int(st.Stream), int(st.Event))
		case planner.Wait:
			err = calls.Wait(int(st.Stream), int(st.Event))
		}
		if err != nil {
			return b.stepError(st, err)
		}
		if i%ctxCheckEvery == ctxCheckEvery-1 && ctx.Err() != nil {
			return fmt.Errorf("executor: %s stopped after %d of %d steps: %w", verb, i+1, len(steps), ctx.Err())
		}
	}
	return nil
}

// submitStretches is submit through a device.Submitter: the plan's steps
// in stretches of ctxCheckEvery, ctx and Close looked at between them.
func (b *submitter) submitStretches(ctx context.Context, sub device.Submitter, ops []*dag.Op, verb string) error {
	steps := b.p.Steps
	if b.timer != nil {
		b.timer.reset()
	}
	for i := 0; i < len(steps); i += ctxCheckEvery {
		if b.closed.Load() { // Close from another goroutine: stop submitting
			return fmt.Errorf("executor: %s stopped after %d of %d steps: the session was %w", verb, i, len(steps), device.ErrClosed)
		}
		if i > 0 && ctx.Err() != nil {
			return fmt.Errorf("executor: %s stopped after %d of %d steps: %w", verb, i, len(steps), ctx.Err())
		}
		stretch := steps[i:min(i+ctxCheckEvery, len(steps))]
		b.stretch = b.stretch[:0]
		for _, st := range stretch {
			d := device.Step{Stream: int(st.Stream), Event: int(st.Event)}
			switch st.Kind {
			case planner.Run:
				d.Kind, d.Op = device.RunStep, ops[st.Op]
			case planner.Record:
				d.Kind = device.RecordStep
			case planner.Wait:
				d.Kind = device.WaitStep
			}
			b.stretch = append(b.stretch, d)
		}
		start := time.Now()
		n, err := sub.Submit(b.stretch)
		if b.timer != nil {
			b.timer.stretch(b.stretch[:min(n+1, len(b.stretch))], time.Since(start))
		}
		if err != nil {
			return b.stepError(&stretch[min(n, len(stretch)-1)], err)
		}
	}
	return nil
}

// calls is what the submission loop calls: the device session, or the
// timer around it (reset for the run) when submission timing was asked
// for.
func (b *submitter) calls() submitSession {
	if b.timer == nil {
		return b.d
	}
	b.timer.reset()
	return b.timer
}

// stepError names the op a failed step belongs to: the op it runs, or the
// op a record follows or a wait precedes.
func (b *submitter) stepError(st *planner.Step, err error) error {
	if _, ok := errors.AsType[*dag.OpError](err); ok {
		return err
	}
	name := fmt.Sprintf("#%d", st.Op)
	if st.Op >= 0 && int(st.Op) < len(b.p.Graph.Ops) {
		name = b.p.Graph.Ops[st.Op].Name
	}
	if st.Kind != planner.Run {
		err = fmt.Errorf("%s of event %d on stream %s: %w", st.Kind, st.Event, streamName(b.p.Streams[st.Stream]), err)
	}
	return &dag.OpError{Op: name, Err: err}
}
