package executor

import (
	"fmt"

	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// early is what became of the plan's early launches (planner.Plan.Early).
type early struct {
	marked, n int    // launches the plan marks, and those the backend launches early
	why       string // why the others go plainly; "" when none does
}

// launchEarly hands the backend the plan's early launches, where it can
// take them (device.EarlyLauncher), before the first run.
func launchEarly(b device.Backend, d device.Session, p *planner.Plan) early {
	e := early{marked: p.EarlyOps()}
	if e.marked == 0 {
		return e
	}
	l, ok := b.(device.EarlyLauncher)
	if !ok {
		e.why = fmt.Sprintf("backend %T launches every kernel after the one before it ends", b)
		return e
	}
	e.n, e.why = l.LaunchEarly(d, p.Early)
	return e
}

// EarlyLaunches says how many kernel launches of the plan go early
// (programmatic dependent launch: launched while the kernel before them
// on their stream runs, on a backend and device that can), and why the
// others the plan marks (planner.Plan.Early) go plainly: "" when none
// does. The results are the same either way.
func (s *Session) EarlyLaunches() (n int, why string) { return s.early.n, s.early.why }
