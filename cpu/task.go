package cpu

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
)

// taskImpl runs a stream task's CPU twin (dag.TaskSpec.CPU) over slices
// that alias the task's views, on the stream's worker like any op; a
// capture holds the op, so every replay runs the twin again. Without a
// twin the session refuses the graph at Open, naming the task.
var taskImpl = kindImpl{
	check: func(op *dag.Op) string {
		if op.Task == nil || op.Task.CPU == nil {
			return "stream task has no CPU twin: give it one with WithCPU to run it on the cpu backend, or run the plan on cuda"
		}
		return ""
	},
	exec: func(ctx context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
		return nil, twin(ctx, op.Task.CPU, mem)
	},
}

// twin runs a task's CPU twin, turning a panic in it into an error.
func twin(ctx context.Context, f dag.HostFunc, mem [][]byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stream task's CPU twin panicked: %v", p)
		}
	}()
	return f(ctx, mem)
}
