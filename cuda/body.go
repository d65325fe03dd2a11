package cuda

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

var _ device.BodyChecker = (*Backend)(nil)

// bodyKinds says which op kinds a loop's or branch's body may hold on this
// backend, which runs a body as the graph of a CUDA conditional node:
// kernels, memsets, copies and further conditional nodes, no host work.
// TestBodyKinds fails when a kind lacks its entry.
var bodyKinds = map[dag.OpKind]bool{
	dag.Alloc: false, dag.Free: false,
	dag.Copy: true, dag.Fill: true, dag.Launch: true, dag.Gemm: true, dag.Memset2D: true,
	dag.Host: false, dag.Task: false,
	dag.AllReduce: false, dag.AllGather: false, dag.ReduceScatter: false,
	dag.Broadcast: false, dag.Send: false, dag.Recv: false,
	dag.While: true, dag.If: true,
}

// CheckBody says why op cannot be in a body of ctl on the cuda backend
// (device.BodyChecker): a kind a conditional node cannot hold, or a copy
// to or from host memory. It needs no driver.
func (b *Backend) CheckBody(ctl, op *dag.Op) error {
	if !bodyKinds[op.Kind] {
		return fmt.Errorf("a %s body cannot hold a %s: a CUDA conditional node holds only kernels, fills, copies in device memory and further loops and branches", ctl.Kind, op.Kind)
	}
	if op.Kind == dag.Copy {
		for _, a := range op.Access {
			if a.Buf.Placement != dag.Device {
				return fmt.Errorf("it copies %s host memory: a body copies within device memory only on the cuda backend", a.Buf.Placement)
			}
		}
	}
	return nil
}
