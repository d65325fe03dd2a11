package cuda

/*
#include "cuda.h"
*/
import "C"

import (
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// A While's condition in its body's last kernel: where the body ends in a
// set_flag of the loop's own flag (dag.Op.CondSetter), that launch runs
// as dr_set_flag_cond, which sets the flag and then the node's condition
// as dr_cond_next would, so each iteration runs one kernel less. It runs
// through Run as the set_flag op, so traces name it so; CUPTI's spans
// count its records as the loop's bounds too (iterations.go).

// condSetter is loop's op whose launch sets its condition, when the
// session runs it as the plain set_flag launch it prepared and the body
// runs it once; nil otherwise (dr_cond_next then ends each iteration).
func (ct *controller) condSetter(loop *dag.Op, bodies [][]device.Step) *dag.Op {
	set := loop.CondSetter()
	if set == nil || len(bodies) != 1 || opSlot(set) >= len(ct.sub.ops) {
		return nil
	}
	st := &ct.sub.ops[opSlot(set)]
	if st.op != set || st.act != actLaunch || st.launch == nil || st.launch.nslots != setFlagSlots {
		return nil
	}
	runs := 0
	for _, s := range bodies[0] {
		if s.Kind == device.RunStep && s.Op == set {
			runs++
		}
	}
	if runs != 1 {
		return nil
	}
	return set
}

// runSetter enqueues c's setter on the session's stream si as the kernel
// that also sets the condition: its arguments as they are now (bindSlots
// writes a temporary's address into the launch it prepared), then the
// handle, state and max that lower and setArgs wrote.
func (ct *controller) runSetter(si int, c *control) error {
	st := &ct.sub.ops[opSlot(c.setter)]
	own := st.launch
	if err := ct.sub.bindSlots(st); err != nil {
		return &dag.OpError{Op: c.setter.Name, Err: err}
	}
	copy(unsafe.Slice(c.setFlag.slots, c.setFlag.nslots)[:setFlagSlots], unsafe.Slice(own.slots, setFlagSlots))
	st.launch = c.setFlag
	defer func() { st.launch = own }()
	return ct.sub.Run(si, c.setter)
}
