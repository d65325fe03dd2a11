package executor

import "time"

// Span is when one op of a run ran: on which stream, from Start to End,
// measured from a common origin (the backend's clock at the run's start).
type Span struct {
	// Op is the op's Index (dag.Op.Index): its ID for the graph's own
	// ops, above them for the ops of loop and branch bodies, which
	// Graph.OpAt finds. A body op of a loop has a span per iteration.
	Op int
	// Stream is the device session's stream: the plan's streams first,
	// then those of its bodies.
	Stream     int
	Start, End time.Duration
	// Iterations is, on a loop's own span, how many iterations it ran
	// where the backend timed only a sample of them, its body ops having
	// spans for those alone (device.LoopCounter); 0 otherwise.
	Iterations int
}

// ReplaySpans are the op spans of one replay of a Graph (Graph.ReplaySpans).
type ReplaySpans struct {
	Launch int // which of the graph's launches it was, from 1
	// Start is when the replay's first op started, and End when its last
	// op ended, measured from the backend's clock at the first launch since
	// the spans were last read; Spans are measured from Start.
	Start, End time.Duration
	// Whole says the replay was timed as a whole graph, not op by op (the
	// cuda backend's "cupti-graph" timing source: CUPTI's graph-level
	// record of the launch, on the device's clock): Start and End are the
	// replay's, and Spans is empty.
	Whole bool
	Spans []Span
}
