// Package executor runs a planner.Plan on a Backend.
//
// Open makes a Session: the backend opens the plan's graph (kernels
// loaded, persistent buffers allocated with their initial contents) and
// creates the plan's streams and events. Session.Run submits the plan's
// steps in their global order (run an op, record an event, wait for one)
// and then waits for the backend to finish them: eager execution, with
// the plan's concurrency and no host synchronisation inside the run. Runs
// can repeat; persistent buffers carry over from one to the next, and
// Read returns their contents. A failing op is reported as a *dag.OpError
// naming it; a cancelled context abandons the run promptly. WithTiming
// collects each op's start and end for traces (Session.Spans).
//
// Session.Capture records the plan once as a Graph (a CUDA graph on the
// cuda backend, a frozen schedule on the cpu backend) after refusing, op by
// op, what a graph cannot hold (CheckCapture). Graph.Launch replays it with
// one call; Graph.Update changes kernel arguments (SetArg) or the memory a
// buffer's ops use (Rebind) between replays by recapturing the plan and
// updating the executable graph in place where the backend can, and
// Session.Write loads new inputs. Backends that capture implement
// Capturer; those that take new inputs implement Writer.
//
// Backends (package cpu, package cuda) implement Backend and, to be
// timed, Timer. They import only package dag: the executor adapts plans to
// them, never the other way round.
package executor
