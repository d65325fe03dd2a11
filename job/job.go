// Package job runs a loaded spec on a backend the way dagrun run does: one
// program, or the ranks of a world (all in this process, or this process's
// rank of a world of processes). Each program is planned for its spec's
// run settings and a caller's Layout, planned again for what the backend
// knows of the machine and for its perf model (Program.Replan), and run
// again and again by an executor.Runner (Run, RunWorld); its outputs are
// read, saved and summed, its perf model learns from the runs, and a
// Report says it all, as the JSON document and the text dagrun run
// writes.
//
// The caller opens the backend and loads the specs (spec.Load), and
// writes what the report points at (traces, perf-model files through
// SaveModel).
package job
