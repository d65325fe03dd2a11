package cuda

// #include <stdint.h>
import "C"

import (
	"fmt"
	"runtime/cgo"

	"github.com/dagrun/dagrun/dag"
)

// hostCall is a host step as the driver's callback finds it.
type hostCall struct {
	host *hostSide
	op   *dag.Op
	mem  [][]byte
}

// dagrunHostCallback runs a host step on the driver thread that reached it
// in stream order; the stream waits until it returns. It makes no CUDA
// call, and a failing or panicking host function only records its error
// for Sync to report.
//
//export dagrunHostCallback
func dagrunHostCallback(h C.uintptr_t) {
	hc := cgo.Handle(h).Value().(*hostCall)
	host := hc.host
	if host.abandoned.Load() {
		return
	}
	if err := hc.call(); err != nil {
		host.hostMu.Lock()
		if host.hostErr == nil {
			host.hostErr = &dag.OpError{Op: hc.op.Name, Err: err}
		}
		host.hostMu.Unlock()
	}
}

func (hc *hostCall) call() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("host step panicked: %v", r)
		}
	}()
	return hc.op.HostFunc(hc.host.hostCtx, hc.mem)
}
