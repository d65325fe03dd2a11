package perf

import (
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// Schedule is what a plan would do if every op took the time a cost model
// gives it: the one simulation behind a plan's estimate, `dagrun plan` and
// the trace's plan view.
type Schedule struct {
	Mode     plan.Mode
	Start    []time.Duration // per op ID: when it starts on its stream
	Duration []time.Duration // per op ID: how long it runs
	Makespan time.Duration   // when the last stream is done
	// Submitted is when the submitter (the host for an eager run, the graph
	// launch for a replay) has issued the last step.
	Submitted time.Duration
}

// Simulate runs p's steps under cost model m (DefaultCost when nil) as mode
// would: each stream runs its steps in order; a wait holds its stream until
// the event's record is reached; and the submitter issues the steps one
// after another in submission order, paying m's overheads (OverheadsOf):
// a run's fixed start, then for an eager run every op, record and wait,
// for a replay every op, and each further stream of a device starts its
// first op a ReplayBranch after the one before. A loop or branch takes one pass of its body: the
// makespan of its body's plan (Plan.Bodies) simulated as a replay (on
// CUDA a body is a graph's, in eager runs too), for a branch the longer
// one. An op starts no sooner than it is issued. Ops that fill their device (Fills)
// run one at a time per device, in submission order; other contention
// between streams is not modelled. All sums saturate. Steps that name streams, ops or events
// the plan lacks are skipped.
func Simulate(p *plan.Plan, m CostModel, mode plan.Mode) Schedule {
	if p == nil {
		return Schedule{Mode: mode}
	}
	if m == nil {
		m = DefaultCost()
	}
	dur := Durations(p, m)
	ops := len(dur)
	start := make([]int64, ops)
	makespan, submitted := SimulateWith(p, dur, nil, OverheadsOf(m), mode, start)
	s := Schedule{Mode: mode, Start: make([]time.Duration, ops), Duration: make([]time.Duration, ops),
		Makespan: time.Duration(makespan), Submitted: time.Duration(submitted)}
	for i := range start {
		s.Start[i], s.Duration[i] = time.Duration(start[i]), time.Duration(dur[i])
	}
	return s
}

// Durations are the durations, in ns, that Simulate gives p's ops under m
// (DefaultCost when nil), by op ID: a loop or branch lasts one pass of its
// body, as its body's plan runs it (Plan.Bodies).
func Durations(p *plan.Plan, m CostModel) []int64 {
	if p == nil || p.Graph == nil {
		return nil
	}
	if m == nil {
		m = DefaultCost()
	}
	dur := make([]int64, len(p.Graph.Ops))
	for i, op := range p.Graph.Ops {
		if op == nil {
			continue
		}
		if d, ok := controlDuration(op, p.Bodies[i], m); ok {
			dur[i] = NonNegative(d)
			continue
		}
		dur[i] = NonNegative(m.Duration(op))
	}
	return dur
}

// SimulateWith is Simulate on durations in ns per op and, when not nil, which
// ops fill their device (else it asks fills); it fills start (per op) when
// not nil and returns the makespan and the submitter's end.
func SimulateWith(p *plan.Plan, dur []int64, fill []bool, ov Overheads, mode plan.Mode, start []int64) (makespan, submitted int64) {
	submit, record, wait, cross := int64(ov.Submit), int64(ov.Record), int64(ov.Wait), int64(ov.CrossDeviceWait)
	host := max(int64(ov.Start), 0)
	if mode == plan.Replay {
		submit, record, wait, cross = int64(ov.ReplayOp), 0, 0, 0
		host = max(int64(ov.ReplayStart), 0)
	}
	submit, record, wait, cross = max(submit, 0), max(record, 0), max(wait, 0), max(cross, 0)
	// The submission cost of each op kind: Submit, or its own where the
	// overheads know it (eager runs only).
	var perKind []int64
	if mode == plan.Eager && len(ov.SubmitKinds) > 0 && p.Graph != nil {
		perKind = make([]int64, len(dag.OpKinds()))
		for k := range perKind {
			perKind[k] = submit
			if d, ok := ov.SubmitKinds[dag.OpKind(k)]; ok {
				perKind[k] = max(int64(d), 0)
			}
		}
	}
	sms := p.SMs
	if sms <= 0 {
		sms = DefaultSMs
	}
	var smFree []int64 // per device: when its filling ops are done
	streamTime := make([]int64, len(p.Streams))
	// A replay sets each device's streams going one after another: a
	// stream's first op starts no sooner than ReplayBranch after the
	// previous stream's of its device.
	var branch int64
	var begun []bool
	var branches []int64 // per device: streams begun so far
	if mode == plan.Replay && ov.ReplayBranch > 0 {
		branch, begun = int64(ov.ReplayBranch), make([]bool, len(p.Streams))
	}
	eventTime := make([]int64, p.Events)
	eventDev := make([]int32, p.Events)
	for _, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= len(streamTime) {
			continue
		}
		switch st.Kind {
		case plan.Run:
			if st.Op < 0 || int(st.Op) >= len(dur) {
				continue
			}
			c := submit
			if perKind != nil {
				if op := p.Graph.Ops[st.Op]; op != nil && int(op.Kind) < len(perKind) {
					c = perKind[op.Kind]
				}
			}
			host = dag.AddSat(host, c)
			if begun != nil && !begun[s] {
				begun[s] = true
				d := p.Streams[s].Device
				if d >= len(branches) {
					branches = append(branches, make([]int64, d+1-len(branches))...)
				}
				streamTime[s] = max(streamTime[s], SatMul(branch, branches[d]))
				branches[d]++
			}
			t := max(streamTime[s], host)
			var filling bool
			if fill != nil {
				filling = fill[st.Op]
			} else if op := p.Graph.Ops[st.Op]; op != nil {
				filling = Fills(op, sms)
			}
			d := p.Streams[s].Device
			if filling {
				if d >= len(smFree) {
					smFree = append(smFree, make([]int64, d+1-len(smFree))...)
				}
				t = max(t, smFree[d])
			}
			if start != nil {
				start[st.Op] = t
			}
			streamTime[s] = dag.AddSat(t, dur[st.Op])
			if filling {
				smFree[d] = streamTime[s]
			}
		case plan.Record:
			host = dag.AddSat(host, record)
			if e := int(st.Event); e >= 0 && e < len(eventTime) {
				eventTime[e] = max(streamTime[s], host)
				eventDev[e] = int32(p.Streams[s].Device)
			}
		case plan.Wait:
			host = dag.AddSat(host, wait)
			if e := int(st.Event); e >= 0 && e < len(eventTime) {
				if int(eventDev[e]) != p.Streams[s].Device {
					host = dag.AddSat(host, cross)
				}
				streamTime[s] = max(streamTime[s], eventTime[e])
			}
		}
	}
	for _, t := range streamTime {
		makespan = max(makespan, t)
	}
	return makespan, host
}

// controlDuration is a control op's duration in a simulation of a plan
// under m: its Cost when set, else the longest makespan of its bodies'
// plans; ok is false when the plan has no bodies for it.
func controlDuration(op *dag.Op, bodies []*plan.Plan, m CostModel) (d time.Duration, ok bool) {
	if bodies == nil {
		return 0, false
	}
	if op.Cost > 0 {
		return op.Cost, true
	}
	// A body is priced as a replay whatever the run: on CUDA it is a
	// conditional node's graph, in eager runs too.
	for _, b := range bodies {
		d = max(d, Simulate(b, m, plan.Replay).Makespan)
	}
	return d, true
}
