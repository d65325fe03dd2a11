// Package cuda runs dagrun plans on NVIDIA GPUs through the CUDA driver API.
//
// The driver (libcuda.so.1), NVRTC, cuBLASLt, NCCL and CUPTI are loaded
// with dlopen at run time and called through hand-declared prototypes, so
// the package builds with cgo but without the CUDA SDK. Where no driver is
// found, or the build has no cgo, New reports an error matching
// ErrNoDriver.
//
// A Backend keeps from New to Close what is costly to make: each device's
// primary context, the module cache and the devices' memory pools. Open
// makes a Session that holds only what its plan needs (buffers, streams,
// events, the C records of its ops, captured graphs) and releases exactly
// that at Close; Live counts what each holds. A Session's work is done by
// its parts, one per job, each given the parts it uses.
//
// # Threads and contexts
//
// CUDA's current context belongs to an OS thread, and goroutines move
// between threads. Rather than pinning a goroutine per session, every C
// wrapper makes the right context current on the thread it runs on and
// then makes its driver call, inside one cgo call that cannot migrate. So
// any goroutine may call a session, and sessions run side by side from
// several goroutines. A session waits only for its own streams (never
// cuCtxSynchronize) and captures in relaxed mode, so that sessions do not
// disturb each other's work or captures.
//
// # Runs and graphs
//
// Streams are non-blocking, with dag priorities mapped onto the device's
// range (StreamPriority). Temporaries come from the device's pool in
// stream order, or from the arenas the plan placed them in
// (Session.UseArenas). Session.Submit enqueues plain steps from C, one
// crossing per stretch of them, so dagrun's cost per op is the driver's.
// A capture runs the same submission code as an eager run, on an origin
// stream that every other stream, of any device, forks from and joins
// back into; loops and branches become conditional graph nodes.
//
// # Several devices
//
// Peer access is enabled between every pair of devices that allow it,
// with their memory pools opened to each other (Backend.Topology; NoPeer
// copies through pinned host memory instead). Collectives run on NCCL once
// a session joins a world of ranks (Session.Join).
package cuda
