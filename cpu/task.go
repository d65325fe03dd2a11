package cpu

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
)

// taskImpl calls a stream task's own function with the host's stream: a
// dag.TaskStream whose Host is set and whose Mem aliases the task's views,
// on the stream's worker like any op; a capture holds the op, so every
// replay calls the function again. A task that does not say it runs on
// the CPU (dag.RunsOnCPU) has a function that can only enqueue on a GPU,
// and the session refuses the graph at Open, naming the task.
var taskImpl = kindImpl{
	check: func(op *dag.Op) string {
		if op.Task == nil || op.Task.Func == nil || !op.Task.OnCPU {
			return "stream task does not run on the CPU: give it dag.RunsOnCPU() where its function does the work on TaskStream.Mem, or run the plan on cuda"
		}
		return ""
	},
	exec: func(ctx context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
		return nil, callTask(ctx, op.Task.Func, dag.TaskStream{Device: op.Device, Host: true, Mem: mem})
	},
}

// callTask calls a task's function, turning a panic in it into an error.
func callTask(ctx context.Context, f dag.TaskFunc, on dag.TaskStream) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stream task panicked: %v", p)
		}
	}()
	return f(ctx, on)
}
