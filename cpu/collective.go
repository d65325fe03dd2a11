package cpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// collectives is the world of a session's collectives: set by Join, else
// a world of one rank on first use.
type collectives struct {
	comm   device.Collectives
	joined bool
}

var _ device.Joiner = (*Session)(nil)

// Join makes the session rank w.Rank of w: its collectives then run
// through w.Comm (internal/comm's Comm, in one process or over TCP), which
// every rank of the world calls in the same order. Call it once, after
// Open and before the first stream is made. A session that never joins is
// the one rank of a world of 1: its collectives run alone, as NCCL's do
// with one rank (all_reduce, reduce_scatter and all_gather copy or keep
// the data, avg divides by 1, broadcast from rank 0 keeps it, a send to
// rank 0 is received by the next recv from rank 0).
func (b *Session) Join(ctx context.Context, w device.World) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cpu: Join: %w", err)
	}
	switch {
	case w.Size < 1 || w.Rank < 0 || w.Rank >= w.Size:
		return fmt.Errorf("cpu: Join: rank %d is not in a world of %d", w.Rank, w.Size)
	case w.Comm == nil && w.Size > 1:
		return fmt.Errorf("cpu: Join: a world of %d ranks needs a communicator (World.Comm): the cpu backend has no collective library of its own", w.Size)
	case w.Comm != nil && (w.Comm.Rank() != w.Rank || w.Comm.World() != w.Size):
		return fmt.Errorf("cpu: Join: the communicator is rank %d of %d, the world says rank %d of %d", w.Comm.Rank(), w.Comm.World(), w.Rank, w.Size)
	}
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	if err := b.sched.usable(); err != nil {
		return err
	}
	switch {
	case b.coll.joined:
		return errors.New("cpu: Join: the session has joined a world already")
	case len(b.sched.streams) > 0:
		return errors.New("cpu: Join: join before making streams")
	}
	b.coll.joined = true
	if w.Comm != nil {
		b.coll.comm = w.Comm
	}
	return nil
}

// collectives is the session's end of its world: the one it joined, or a
// world of one rank. The lock is held.
func (cl *collectives) collectives() device.Collectives {
	if cl.comm == nil {
		cl.comm = &solo{}
	}
	return cl.comm
}

// RunCollective runs collective op of this rank through c; mem[i] holds the
// bytes of op.Access[i]. Errors are *dag.OpError naming the op; a failure
// of this rank's own (bad arguments) aborts the world, since the others
// would wait for it.
func RunCollective(ctx context.Context, c device.Collectives, op *dag.Op, mem [][]byte) error {
	if err := runCollective(ctx, c, op, mem); err != nil {
		return &dag.OpError{Op: op.Name, Err: err}
	}
	return nil
}

func runCollective(ctx context.Context, c device.Collectives, op *dag.Op, mem [][]byte) error {
	impl, ok := kinds[op.Kind]
	if !ok || impl.collective == nil {
		return fmt.Errorf("%s is not a collective", op.Kind)
	}
	return callCollective(ctx, c, op, mem, impl.collective)
}

// collectiveCall is how one collective kind runs through a world.
type collectiveCall func(ctx context.Context, c device.Collectives, spec *dag.CollectiveSpec, dt dag.DType, mem [][]byte) error

// callCollective checks op's shape and runs it with call.
func callCollective(ctx context.Context, c device.Collectives, op *dag.Op, mem [][]byte, call collectiveCall) error {
	if op.Collective == nil {
		return fmt.Errorf("%s is not a collective", op.Kind)
	}
	if n := op.Kind.Info().Accesses; len(mem) != n || len(op.Access) != n {
		err := fmt.Errorf("%s takes %d views, got %d", op.Kind, n, len(mem))
		c.Abort(err)
		return err
	}
	return call(ctx, c, op.Collective, op.Access[0].Buf.DType, mem)
}

// solo is the one rank of a world of 1: every reduction over one rank is
// that rank's data (avg multiplies floats by 1/1 and divides integers by
// 1), gathers and scatters copy, and sends to itself queue for its recvs.
// Its calls come from the session's workers, one collective at a time
// (collectives are chained in one order), so it needs no lock.
type solo struct {
	sent [][]byte
}

func (*solo) Rank() int  { return 0 }
func (*solo) World() int { return 1 }

func (*solo) AllReduce(context.Context, []byte, dag.DType, dag.Reduction) error { return nil }

func (*solo) AllGather(_ context.Context, in, out []byte) error {
	return soloCopy("all_gather", in, out)
}

func (*solo) ReduceScatter(_ context.Context, in, out []byte, _ dag.DType, _ dag.Reduction) error {
	return soloCopy("reduce_scatter", in, out)
}

func (*solo) Broadcast(_ context.Context, _ []byte, root int) error {
	if root != 0 {
		return fmt.Errorf("broadcast from rank %d: the session is the only rank of its world (join a world with more ranks)", root)
	}
	return nil
}

func (s *solo) Send(_ context.Context, buf []byte, to int) error {
	if to != 0 {
		return fmt.Errorf("send to rank %d: the session is the only rank of its world (join a world with more ranks)", to)
	}
	s.sent = append(s.sent, append([]byte(nil), buf...))
	return nil
}

func (s *solo) Recv(_ context.Context, buf []byte, from int) error {
	switch {
	case from != 0:
		return fmt.Errorf("recv from rank %d: the session is the only rank of its world (join a world with more ranks)", from)
	case len(s.sent) == 0:
		return errors.New("recv from rank 0 with no send to rank 0 before it: it would wait forever")
	case len(s.sent[0]) != len(buf):
		return fmt.Errorf("recv of %d bytes from a send of %d", len(buf), len(s.sent[0]))
	}
	copy(buf, s.sent[0])
	s.sent = s.sent[1:]
	return nil
}

func (*solo) Abort(error) {}

func soloCopy(what string, in, out []byte) error {
	if len(in) != len(out) {
		return fmt.Errorf("%s in a world of 1 takes views of one size, not %d and %d bytes", what, len(in), len(out))
	}
	copy(out, in)
	return nil
}

// collectivesKey is the context key under which step hands a collective op
// the session's world.
type collectivesKey struct{}

func withCollectives(ctx context.Context, c device.Collectives) context.Context {
	return context.WithValue(ctx, collectivesKey{}, c)
}

// collectivesOf is the world step put in ctx; a world of one rank if none
// (a collective run outside a session's step).
func collectivesOf(ctx context.Context) device.Collectives {
	if c, ok := ctx.Value(collectivesKey{}).(device.Collectives); ok {
		return c
	}
	return &solo{}
}
