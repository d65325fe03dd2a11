package verify

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// checkEarly checks the launches marked early (Plan.Early). Such a kernel
// is launched while the op before it on its stream still runs and waits
// for that op on the device (griddepcontrol.wait), which waits for the
// kernel it was launched after and nothing else. So it must be a kernel
// that waits (a builtin, or a launch that says so), the op before it on
// its stream a kernel launch too, and no wait may come between them: a
// wait's work on another stream would not be waited for.
func (v *verifier) checkEarly() error {
	p := v.p
	if len(p.Early) == 0 {
		return nil
	}
	if len(p.Early) != len(v.ops) {
		return malformed("Early has %d entries for %d ops", len(p.Early), len(v.ops))
	}
	last := make([]int32, v.streams) // the op last run on each stream; -1 at its start and after a wait
	for i := range last {
		last[i] = -1
	}
	for _, st := range p.Steps {
		switch st.Kind {
		case plan.Wait:
			last[st.Stream] = -1
		case plan.Run:
			if p.Early[st.Op] {
				op, prev := v.ops[st.Op], last[st.Stream]
				var why string
				switch {
				case !waitsOnDevice(op):
					why = "is not a kernel that waits on the device for the kernel before it"
				case prev < 0:
					why = fmt.Sprintf("follows no op on %s, or a wait", v.streamName(st.Stream))
				case v.ops[prev].Kind != dag.Launch:
					why = fmt.Sprintf("follows %s op %q, not a kernel", v.ops[prev].Kind, v.opName(prev))
				}
				if why != "" {
					return &Error{Kind: BadEarly, Ops: []string{op.Name}, Msg: fmt.Sprintf("op %q launches early but %s", op.Name, why)}
				}
			}
			last[st.Stream] = st.Op
		}
	}
	return nil
}

// waitsOnDevice reports whether op is a launch of a kernel that waits for
// the kernel before it on its stream before touching memory.
func waitsOnDevice(op *dag.Op) bool {
	l := op.Launch
	return op.Kind == dag.Launch && l != nil && l.Kernel != nil && (l.Kernel.Source == dag.Builtin || l.Early)
}
