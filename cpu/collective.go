package cpu

import (
	"context"
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Communicator is one rank's end of a world, as the CPU backend needs it:
// internal/comm's Comm, in one process or over TCP. Every rank calls the
// collectives in the same order.
type Communicator interface {
	Rank() int
	World() int
	AllReduce(ctx context.Context, buf []byte, dt dag.DType, op dag.Reduction) error
	AllGather(ctx context.Context, in, out []byte) error
	ReduceScatter(ctx context.Context, in, out []byte, dt dag.DType, op dag.Reduction) error
	Broadcast(ctx context.Context, buf []byte, root int) error
	Send(ctx context.Context, buf []byte, to int) error
	Recv(ctx context.Context, buf []byte, from int) error
	// Abort makes the other ranks fail at once instead of waiting for this one.
	Abort(cause error)
}

// RunCollective runs collective op of this rank through c; mem[i] holds the
// bytes of op.Access[i]. Errors are *dag.OpError naming the op; a failure
// of this rank's own (bad arguments) aborts the world, since the others
// would wait for it.
func RunCollective(ctx context.Context, c Communicator, op *dag.Op, mem [][]byte) error {
	if err := runCollective(ctx, c, op, mem); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	return nil
}

func runCollective(ctx context.Context, c Communicator, op *dag.Op, mem [][]byte) error {
	if !op.Kind.IsCollective() || op.Collective == nil {
		return fmt.Errorf("%s is not a collective", op.Kind)
	}
	if n := op.Kind.Info().Accesses; len(mem) != n || len(op.Access) != n {
		err := fmt.Errorf("%s takes %d views, got %d", op.Kind, n, len(mem))
		c.Abort(err)
		return err
	}
	spec := op.Collective
	dt := op.Access[0].Buf.DType
	switch op.Kind {
	case dag.AllReduce:
		return c.AllReduce(ctx, mem[0], dt, spec.Reduction)
	case dag.AllGather:
		return c.AllGather(ctx, mem[0], mem[1])
	case dag.ReduceScatter:
		return c.ReduceScatter(ctx, mem[0], mem[1], dt, spec.Reduction)
	case dag.Broadcast:
		return c.Broadcast(ctx, mem[0], spec.Root)
	case dag.Send:
		return c.Send(ctx, mem[0], spec.Peer)
	case dag.Recv:
		return c.Recv(ctx, mem[0], spec.Peer)
	}
	return fmt.Errorf("%s is not a collective", op.Kind)
}
