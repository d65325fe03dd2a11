// Package comm runs collectives among the ranks of a world on the CPU: the
// oracle that dagrun's NCCL collectives are compared with, and the
// transport of the CPU backend when ranks are separate processes (as
// PyTorch's gloo is for its CPU tensors).
//
// A world of N ranks is either N Comms in one process (NewLocal: each rank
// a session of its own, sharing in-memory mailboxes) or one Comm per
// process joined over TCP (Rendezvous: rank 0 listens at MASTER_ADDR on
// dagrun's own port, DAGRUN_PORT, default 29511; the others connect to it).
// MASTER_PORT is not used because torchrun's own TCP store already listens
// there when torchrun launches the ranks. Every rank's messages go through
// rank 0 (a star): the ranks need only reach rank 0, as with torchrun.
//
// Rank 0 listens only at MASTER_ADDR. Every connection is authenticated
// with the job's secret (SecretEnv): the hello and every later frame carry
// an HMAC-SHA256 keyed by it over both ends' nonces and the frame's
// sequence number, a connection whose hello fails is closed without an
// answer, and a frame's sender is the connection it came on. What a
// connection may make a rank hold is bounded before any check (a hello of
// a few kilobytes, a bounded number of waiting connections, each for a
// bounded time) and after (Options.InboxBytes).
//
// At rendezvous the ranks exchange the hash of their collective sequence
// (dag.Graph.CollectiveSequence) and refuse to start, naming the first
// difference, when they disagree; rank 0 hands every rank a payload of its
// choosing (the NCCL unique id for the CUDA backend). A rank that misses
// the rendezvous is named in the error of the others.
//
// Collectives follow NCCL's semantics (see dag's notes on reductions): sums
// wrap for integers; avg divides after summing integers and multiplies by
// 1/N before summing floats. Rank 0 reduces the ranks' data in rank order,
// so the results are deterministic. Send and Recv pair up in order per
// peer; sends are buffered, so they never block.
//
// Failures never hang: a rank that fails calls Abort, and every other rank's
// pending and later calls fail with an error naming it; a rank that dies
// closes its connection, which the others see at once; and every wait for
// another rank gives up after Options.Timeout with an error naming the
// rank it waited for.
package comm
