package executor

import "github.com/dagrun/dagrun/executor/device"

// Errors to test for with errors.Is. They are package device's, named here
// too so that a program needs only this package: the executor's errors and
// the backends' wrap the same values, with the call and the object named.
var (
	// ErrClosed: the session, graph, world, rank or backend was closed
	// before or during the call.
	ErrClosed = device.ErrClosed
	// ErrBusy: work the call would race is still in flight (another call
	// of the session from another goroutine, or an Enqueue or Launch not
	// yet synchronised): Sync first.
	ErrBusy = device.ErrBusy
	// ErrNoDevice: the backend asked for has nothing to run on here (no
	// CUDA driver or device); Run with the default backend falls back to
	// the CPU instead.
	ErrNoDevice = device.ErrNoDevice
)
