package executor

import "time"

// Span is when one op of a run ran: on which stream, from Start to End,
// measured from a common origin (the backend's clock at the run's start).
type Span struct {
	Op, Stream int
	Start, End time.Duration
}
