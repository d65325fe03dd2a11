package device

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// BodyChecker is implemented by backends whose loops and branches cannot
// hold every op that package dag lets a body hold: the cuda backend runs
// a body as a CUDA conditional node's graph, which holds no host work.
// executor.Open asks it about every op of every body (CheckBodies) before
// it opens a session, and refuses the plan naming the ops refused.
type BodyChecker interface {
	// CheckBody returns why op, an op of a body of the loop or branch ctl,
	// cannot run there on this backend; nil when it can.
	CheckBody(ctl, op *dag.Op) error
}

// CheckBodies asks c about every op of every body of g's loops and
// branches, nested ones included, and returns a dag.ErrorList with one
// error per op refused, naming it, or nil.
func CheckBodies(c BodyChecker, g *dag.Graph) error {
	var errs dag.ErrorList
	var walk func(g *dag.Graph)
	walk = func(g *dag.Graph) {
		for _, ctl := range g.Ops {
			for _, body := range ctl.Bodies() {
				for _, op := range body.Ops {
					if err := c.CheckBody(ctl, op); err != nil {
						errs = append(errs, &dag.Error{Op: op.Name, Msg: err.Error(),
							Hint: fmt.Sprintf("move it before or after the %s %s", ctl.Kind, ctl.Name)})
					}
				}
				walk(body)
			}
		}
	}
	walk(g)
	if len(errs) == 0 {
		return nil
	}
	return errs
}
