package cuda

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/executor/device"
)

// ErrNoDriver is reported (through errors.Is) when there is no usable NVIDIA
// driver: libcuda.so.1 cannot be loaded, lacks an entry point dagrun needs,
// or finds no device.
// It matches device.ErrNoDevice too, so "auto" passes over this backend.
var ErrNoDriver error = noDriverError{}

type noDriverError struct{}

func (noDriverError) Error() string { return "no usable NVIDIA driver" }

func (noDriverError) Is(target error) bool { return target == device.ErrNoDevice }

// ErrNoNVRTC is reported (through errors.Is) when CUDA C must be compiled
// but no NVRTC library can be loaded.
var ErrNoNVRTC = errors.New("no NVRTC library")

// Error is a failed driver call.
type Error struct {
	Call string // the driver entry point, for example "cuLaunchKernel"
	Code int    // the CUresult
	Name string // the CUresult's name, for example "CUDA_ERROR_INVALID_VALUE"
	Msg  string // the driver's description of it
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult"
	}
	if e.Msg == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Call, name, e.Code)
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, name, e.Code, e.Msg)
}

// CUresult codes the backend treats specially.
const (
	codeInvalidValue = 1
	codeOutOfMemory  = 2
	codeNotFound     = 500
)

// NVRTCError is a failed NVRTC call; Log holds the compiler's output.
type NVRTCError struct {
	Call string
	Code int
	Msg  string
	Log  string
}

func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Msg, e.Code)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}
