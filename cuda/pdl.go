package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Programmatic dependent launch: a kernel launched with programmatic stream
// serialization (cuLaunchKernelEx) may start while the kernel before it on
// its stream still runs, and waits for it on the device (griddepcontrol.wait;
// every builtin does, builtins.go). Under stream capture such a launch
// becomes a programmatic edge of the graph, from CUDA 12.3 on. The planner
// marks the launches where it pays (planner.Plan.Early); the executor hands
// the marks to LaunchEarly before the first run.

var _ device.EarlyLauncher = (*Backend)(nil)

// pdlMinDriver is the first driver whose stream capture turns programmatic
// stream serialization into programmatic graph edges (CUDA 12.3): with an
// older one, eager launches could go early and captured ones not, so
// neither does.
const pdlMinDriver = 12030

// pdlMinMajor is the first compute capability with programmatic dependent
// launch (9.0: Hopper) and the griddepcontrol instructions.
const pdlMinMajor = 9

// pdlUnsupported says why launches cannot go early on a driver of version
// (cuDriverGetVersion) with or without cuLaunchKernelEx, on a device of
// compute capability major.minor named name; "" when they can.
func pdlUnsupported(version int, hasLaunchEx bool, name string, major, minor int) string {
	switch {
	case !hasLaunchEx:
		return fmt.Sprintf("the driver (CUDA %d.%d) has no cuLaunchKernelEx", version/1000, version%1000/10)
	case version < pdlMinDriver:
		return fmt.Sprintf("the driver (CUDA %d.%d) does not capture programmatic dependent launches into graphs (CUDA 12.3 or newer)", version/1000, version%1000/10)
	case major < pdlMinMajor:
		return fmt.Sprintf("%s (compute capability %d.%d) has no programmatic dependent launch (9.0 or newer)", name, major, minor)
	}
	return ""
}

// LaunchEarly makes the launches of s that early marks, by op ID of its
// graph (planner.Plan.Early), go early in every run and capture after it,
// where the driver and the op's device have programmatic dependent launch
// and the op is a launch whose kernel waits for its producer (a builtin,
// or dag.LaunchSpec.Early). It returns how many go early and why the
// others do not ("" when all do). Call it before the first run.
func (b *Backend) LaunchEarly(s device.Session, early []bool) (n int, why string) {
	se, ok := s.(*Session)
	if !ok || se.b != b {
		return 0, fmt.Sprintf("session %T is not one of this backend's", s)
	}
	return joined(se).sub.launchEarly(early)
}

// launchEarly does the work of LaunchEarly.
func (sm *submitter) launchEarly(early []bool) (n int, why string) {
	if sm.drv == nil || sm.hold.g == nil {
		return 0, "the session is not open"
	}
	g := sm.hold.g
	hasEx := C.dr_launch_ex_supported(sm.drv.api) != 0
	for id, e := range early {
		if !e || id >= len(g.Ops) || id >= len(sm.ops) {
			continue
		}
		op, st := g.Ops[id], &sm.ops[id]
		if st.act != actLaunch || st.launch == nil || !waitsForProducer(op) {
			if why == "" {
				why = fmt.Sprintf("op %q is not a launch of a kernel that waits for its producer", op.Name)
			}
			continue
		}
		d := sm.hold.devs[op.Device]
		if d == nil {
			continue
		}
		if w := pdlUnsupported(sm.drv.version, hasEx, d.info.name, d.info.major, d.info.minor); w != "" {
			if why == "" {
				why = w
			}
			continue
		}
		st.launch.early = 1
		n++
	}
	return n, why
}

// waitsForProducer reports whether op's kernel waits on the device for the
// kernel before it (griddepcontrol.wait) before touching memory.
func waitsForProducer(op *dag.Op) bool {
	l := op.Launch
	return op.Kind == dag.Launch && l != nil && l.Kernel != nil && (l.Kernel.Source == dag.Builtin || l.Early)
}

// pdlBinding lists the enum value, structure sizes and field offsets the
// binding of cuLaunchKernelEx declares by hand (cuda.h), with the C
// expressions that give them in the driver's cuda.h, for
// TestPDLBindingMatchesHeaders and cuda/testdata/pdl_check.c.
func pdlBinding() []bindingValue {
	var a C.dr_launch_attr
	var c C.dr_launch_config
	return []bindingValue{
		{"CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION", C.DR_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION},
		{"sizeof(CUlaunchAttributeID)", int64(unsafe.Sizeof(a.id))},
		{"sizeof(CUlaunchAttribute)", int64(unsafe.Sizeof(a))},
		{"offsetof(CUlaunchAttribute, value)", int64(unsafe.Offsetof(a.value))},
		{"sizeof(CUlaunchAttributeValue)", int64(unsafe.Sizeof(a.value))},
		// A union's members all start at its start; cgo gives unions as
		// bytes, so these two are C's facts about dr_launch_attr's int.
		{"offsetof(CUlaunchAttributeValue, programmaticStreamSerializationAllowed)", 0},
		{"sizeof(((CUlaunchAttributeValue*)0)->programmaticStreamSerializationAllowed)", int64(C.sizeof_int)},
		{"sizeof(CUlaunchConfig)", int64(unsafe.Sizeof(c))},
		{"offsetof(CUlaunchConfig, gridDimX)", int64(unsafe.Offsetof(c.gridDimX))},
		{"offsetof(CUlaunchConfig, blockDimX)", int64(unsafe.Offsetof(c.blockDimX))},
		{"offsetof(CUlaunchConfig, sharedMemBytes)", int64(unsafe.Offsetof(c.sharedMemBytes))},
		{"offsetof(CUlaunchConfig, hStream)", int64(unsafe.Offsetof(c.hStream))},
		{"offsetof(CUlaunchConfig, attrs)", int64(unsafe.Offsetof(c.attrs))},
		{"offsetof(CUlaunchConfig, numAttrs)", int64(unsafe.Offsetof(c.numAttrs))},
	}
}

// pdlSupport says why launches on device ordinal of b cannot go early; ""
// when they can.
func pdlSupport(b *Backend, ordinal int) (string, error) {
	d, err := b.device(ordinal)
	if err != nil {
		return "", err
	}
	return pdlUnsupported(b.drv.version, C.dr_launch_ex_supported(b.drv.api) != 0, d.info.name, d.info.major, d.info.minor), nil
}
