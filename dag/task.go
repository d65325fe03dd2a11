package dag

import (
	"context"
	"fmt"
)

// TaskStream is what a stream task's function gets: where to enqueue its
// work and the addresses of its views.
type TaskStream struct {
	// Handle is the CUstream the op runs on.
	Handle uintptr
	// Device is the ordinal of the stream's device; its context is
	// current on the calling thread.
	Device int
	// Addrs holds the address of each of the op's views, in the order of
	// its accesses.
	Addrs []uintptr
}

// TaskFunc enqueues a stream task's work: a user's function that enqueues
// anything (a library call, the user's own cgo) on the stream the planner
// chose for it, the way CUDASTF's tasks receive a stream.
//
// A task declares the views it reads and writes like any other op, so
// dagrun orders it with the rest of the graph; what the function does
// inside those views is its own business. The contract:
//
//   - The function only enqueues work on TaskStream.Handle: it does not
//     synchronise (no cuStreamSynchronize, cuCtxSynchronize, blocking
//     copies), allocates nothing of its own inside the run (make library
//     handles and workspaces before the run) and uses no other stream.
//   - It touches only the bytes of its declared views, through
//     TaskStream.Addrs: the device address of each view, in access order
//     (the host address, which the device can use, for pinned host
//     memory). The addresses hold for the run; a temporary's address may
//     change from run to run, and a graph's Rebind or Update runs the
//     function again with the new ones.
//   - It runs on the submitting goroutine, in plan order, on a locked OS
//     thread with the op's device context current.
//   - Under graph capture it runs once per capture, not per replay: what
//     it enqueues is captured, and each replay repeats that work.
//   - An error it returns stops the run as any failing op does, as a
//     *OpError naming the task.
//
// The CPU backend runs a task's CPU twin (WithCPU) instead, on the CPU
// stream's goroutine like any op, over slices that alias the views; each
// replay of a CPU graph runs the twin again, as a CUDA replay repeats the
// captured work. A task without a twin cannot run there, and the CPU
// backend refuses the plan up front, naming the task.
type TaskFunc func(ctx context.Context, on TaskStream) error

// TaskSpec is the task-specific part of a Task op.
type TaskSpec struct {
	Func TaskFunc
	// CPU is the twin the cpu backend runs: mem[i] aliases the bytes of
	// access i. It must not keep them after it returns.
	CPU HostFunc
}

// Task declares a stream task named name: fn enqueues the op's work on its
// stream, reading and writing the given views (In, Out, InOut). Add a CPU
// twin with WithCPU to run the graph on the cpu backend too.
func (g *Builder) Task(name string, fn TaskFunc, access ...Access) *Op {
	o := g.op(Task, access...)
	o.Name = name
	o.Task = &TaskSpec{Func: fn}
	return o
}

// WithCPU gives a stream task the twin the cpu backend runs in its place.
// On an op of another kind Build reports it.
func (o *Op) WithCPU(twin HostFunc) *Op {
	if o.Task == nil {
		o.Task = &TaskSpec{}
	}
	o.Task.CPU = twin
	return o
}

// checkTask: a function, and memory the device can address.
func checkTask(c *checker, o *Op) {
	if o.Task == nil || o.Task.Func == nil {
		c.fail(o, "", "pass the function that enqueues the work to Builder.Task", "stream task has no function")
	}
	for _, a := range o.Access {
		if a.Buf.Placement == Pageable {
			c.fail(o, "", fmt.Sprintf("make %s pinned (dag.PinnedHost()) or a device buffer", a.Buf.Name),
				"stream task uses pageable host buffer %s, which the device cannot address", a.Buf.Name)
		}
	}
}

// checkNotTask refuses a CPU twin on an op that is not a stream task.
func checkNotTask(c *checker, o *Op) {
	if o.Kind != Task && o.Task != nil {
		c.fail(o, "", "only stream tasks (Builder.Task) take a CPU twin", "%s has a CPU twin", o.Kind)
	}
}
