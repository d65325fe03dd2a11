package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Options tune New.
type Options struct {
	Streams           int       // compute streams per device and priority; 0 means 4; 1..32
	SharedCopyStreams bool      // false (default): separate copy streams per direction (h2d, d2h, d2d)
	Cost              CostModel // nil means DefaultCost()
}

const (
	defaultStreams = 4
	maxStreams     = 32
)

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Streams == 0 {
		o.Streams = defaultStreams
	}
	if o.Streams < 1 || o.Streams > maxStreams {
		return o, &dag.Error{Field: "streams", Msg: fmt.Sprintf("stream budget %d is out of range", o.Streams),
			Hint: fmt.Sprintf("use 1 to %d compute streams per device and priority", maxStreams)}
	}
	if o.Cost == nil {
		o.Cost = DefaultCost()
	}
	return o, nil
}
