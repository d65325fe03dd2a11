package dag

import (
	"context"
	"fmt"
)

// TaskStream is what a stream task's function gets: where to put its work
// and its views, as the backend running it addresses them. See TaskFunc
// for the contract.
type TaskStream struct {
	// Handle is the CUstream the op runs on; 0 where the stream is the
	// host's (Host).
	Handle uintptr
	// Device is the ordinal of the stream's device; on a GPU its context
	// is current on the calling thread.
	Device int
	// Addrs holds the device address of each of the op's views, in the
	// order of its accesses; nil where the stream is the host's.
	Addrs []uintptr
	// Host says the stream is the host's (the CPU backend's): there is
	// nothing to enqueue on, and the function does its work itself, on
	// Mem, before it returns.
	Host bool
	// Mem holds the bytes of each of the op's views, in the order of its
	// accesses, where Host is set: they alias the buffers, and the
	// function must not keep them after it returns.
	Mem [][]byte
}

// TaskFunc is the body of a stream task (Builder.Task): a user's function
// that enqueues anything (a library call, the user's own cgo) on the
// stream the planner chose for it, the way CUDASTF's tasks receive a
// stream.
//
// A task declares the views it reads and writes like any other op, so
// dagrun orders it with the rest of the graph; what the function does
// inside those views is its own business. The contract, on a GPU:
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
// On the CPU backend a task runs where its function can run on the CPU,
// which the task says with RunsOnCPU. The function is then called with a
// TaskStream whose Host is set and whose Mem aliases the views, on the CPU
// stream's goroutine, in stream order like any op, and does the work
// itself before it returns; each replay of a CPU graph calls it again, as
// a CUDA replay repeats the captured work. A function that serves both
// branches on TaskStream.Host. The CPU backend refuses a plan that holds a
// task without RunsOnCPU up front, naming the task.
type TaskFunc func(ctx context.Context, on TaskStream) error

// TaskSpec is the task-specific part of a Task op.
type TaskSpec struct {
	Func TaskFunc
	// OnCPU says Func can run on the CPU backend (RunsOnCPU).
	OnCPU bool
}

// Task declares a stream task: fn enqueues the op's work on its stream,
// reading and writing the views among opts (In, Out, InOut), in order.
// RunsOnCPU lets the CPU backend call fn too. For example:
//
//	b.Task(gemm, dag.In(a.All()), dag.In(w.All()), dag.Out(c.All()), dag.Name("sgemm"), dag.RunsOnCPU())
func (g *Builder) Task(fn TaskFunc, opts ...OpOption) *Op {
	o := g.op(Task, g.accesses(accessCount(opts))...)
	o.Task = &TaskSpec{Func: fn}
	return o.With(opts...)
}

// RunsOnCPU says a stream task's function can run on the CPU backend too,
// doing its work itself on TaskStream.Mem when TaskStream.Host is set (see
// TaskFunc).
func RunsOnCPU() OpOption {
	return kindOption("RunsOnCPU", func(o *Op) {
		if o.Task == nil {
			o.Task = &TaskSpec{}
		}
		o.Task.OnCPU = true
	}, Task)
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
