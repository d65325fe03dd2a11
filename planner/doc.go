// Package planner schedules a dag.Graph onto streams.
//
// New assigns every op to an in-order stream of its device, priority and
// kind (compute, or a copy stream per direction), keeping dependency chains
// on one stream where that costs no concurrency and spreading independent
// work over at most Options.Streams compute streams. Dependencies across
// streams become an event recorded after the producer and a wait before the
// consumer; a wait that earlier waits already imply (tracked with vector
// clocks over streams) is left out. Temporary buffers are allocated and
// freed by ordinary ops, so a free waits for every user on every stream.
//
// The result, a Plan, is one global submission order of steps (run, record,
// wait) in which every record precedes its waits; each stream's steps, in
// that order, are its instruction list. A cost model estimates each op's
// duration; every plan reports its ops, streams, cross-stream edges, waits,
// and its estimated makespan beside the critical-path bound.
//
// Verify checks a plan independently of how New made it.
package planner
