package cpu

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// kindImpl is how the cpu backend does the ops of one kind.
type kindImpl struct {
	// check reports what is wrong with the shape of op beyond its number
	// of accesses (dag.KindInfo.Accesses), or "".
	check func(op *dag.Op) string
	// resolve, when set, replaces gathering the bytes of op's accesses:
	// the lifetime kinds check the temporary's state instead. It runs
	// under the session's lock.
	resolve func(s *memory, op *dag.Op) error
	// exec does op on mem, the bytes of its accesses, without the lock. An
	// alloc returns the memory it made, for commit.
	exec func(ctx context.Context, stop *atomic.Bool, op *dag.Op, kernel kernelFunc, mem [][]byte) ([]byte, error)
	// commit, when set, makes op's effect on the session's memory map
	// visible to later ops; it runs under the lock.
	commit func(s *memory, op *dag.Op, made []byte) error
	// kernel, when set, makes the Go function that exec gets for op
	// (launches find theirs among the builtins instead).
	kernel func(op *dag.Op) (kernelFunc, error)
	// collective, for the collective kinds, is how the op runs through
	// the session's world.
	collective collectiveCall
}

// kinds holds every op kind of dag.OpKinds(); TestKindTable checks that.
var kinds = map[dag.OpKind]kindImpl{
	dag.Alloc: {
		check: checkTemporary,
		resolve: func(s *memory, op *dag.Op) error {
			if buf := op.Access[0].Buf; s.mem[buf.ID] != nil {
				return fmt.Errorf("temporary %s is allocated already; it needs a free before it is allocated again", buf.Name)
			}
			return nil
		},
		exec: func(_ context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, _ [][]byte) ([]byte, error) {
			return makeBuffer(op.Access[0].Buf)
		},
		commit: func(s *memory, op *dag.Op, made []byte) error {
			buf := op.Buffer()
			if s.mem[buf.ID] != nil {
				return fmt.Errorf("temporary %s was allocated by another op meanwhile", buf.Name)
			}
			s.mem[buf.ID] = made
			s.countTemporary(buf, 1) // arena.go
			return nil
		},
	},
	dag.Free: {
		check: checkTemporary,
		resolve: func(s *memory, op *dag.Op) error {
			if buf := op.Access[0].Buf; s.mem[buf.ID] == nil {
				return fmt.Errorf("temporary %s is not allocated (freed twice, or never allocated)", buf.Name)
			}
			return nil
		},
		exec: func(context.Context, *atomic.Bool, *dag.Op, kernelFunc, [][]byte) ([]byte, error) { return nil, nil },
		commit: func(s *memory, op *dag.Op, _ []byte) error {
			buf := op.Buffer()
			if s.mem[buf.ID] == nil {
				return fmt.Errorf("temporary %s was freed by another op meanwhile", buf.Name)
			}
			s.mem[buf.ID] = nil
			s.countTemporary(buf, -1) // arena.go
			return nil
		},
	},
	dag.Copy: {
		check: func(op *dag.Op) string {
			if op.Access[0].Size != op.Access[1].Size {
				return fmt.Sprintf("copy from %s into %s of another size", op.Access[0].View, op.Access[1].View)
			}
			return ""
		},
		exec: func(_ context.Context, _ *atomic.Bool, _ *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
			copy(mem[1], mem[0])
			return nil, nil
		},
	},
	dag.Fill: {
		check: func(op *dag.Op) string {
			v := op.Access[0]
			if es := v.Buf.DType.Size(); v.Offset%es != 0 || v.Size%es != 0 {
				return fmt.Sprintf("fill of %s is not aligned to %s elements", v.View, v.Buf.DType)
			}
			return ""
		},
		exec: func(_ context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
			dag.FillElems(mem[0], op.Access[0].Buf.DType, op.FillValue)
			return nil, nil
		},
	},
	dag.Launch: {
		check: func(op *dag.Op) string {
			if op.Launch == nil || op.Launch.Kernel == nil {
				return "launch has no kernel"
			}
			return ""
		},
		exec: func(_ context.Context, stop *atomic.Bool, op *dag.Op, kernel kernelFunc, mem [][]byte) ([]byte, error) {
			return nil, kernel(stop, op.Launch.Args, mem)
		},
	},
	dag.Host: {
		check: func(op *dag.Op) string {
			if op.HostFunc == nil {
				return "host step has no function"
			}
			return ""
		},
		exec: func(ctx context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
			return nil, host(ctx, op.HostFunc, mem)
		},
	},
	dag.Gemm: {
		check: func(op *dag.Op) string {
			if err := checkGemm(op); err != nil {
				return err.Error()
			}
			return ""
		},
		exec: func(_ context.Context, stop *atomic.Bool, _ *dag.Op, kernel kernelFunc, mem [][]byte) ([]byte, error) {
			return nil, kernel(stop, nil, mem)
		},
		kernel: gemmKernel,
	},
	dag.Memset2D: {
		check: func(op *dag.Op) string {
			if op.Memset2D == nil {
				return "memset2d has no region"
			}
			if n, ok := op.Memset2D.Bound(op.Access[0].Buf.DType.Size()); !ok || n != op.Access[0].Size {
				return fmt.Sprintf("memset2d region does not fit %s", op.Access[0].View)
			}
			return ""
		},
		exec: func(_ context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
			dt := op.Access[0].Buf.DType
			op.Memset2DRows(func(start, end int64) { dag.FillElems(mem[0][start:end], dt, op.FillValue) })
			return nil, nil
		},
	},
	dag.AllReduce: collectiveImpl(func(ctx context.Context, c device.Collectives, s *dag.CollectiveSpec, dt dag.DType, mem [][]byte) error {
		return c.AllReduce(ctx, mem[0], dt, s.Reduction)
	}),
	dag.AllGather: collectiveImpl(func(ctx context.Context, c device.Collectives, _ *dag.CollectiveSpec, _ dag.DType, mem [][]byte) error {
		return c.AllGather(ctx, mem[0], mem[1])
	}),
	dag.ReduceScatter: collectiveImpl(func(ctx context.Context, c device.Collectives, s *dag.CollectiveSpec, dt dag.DType, mem [][]byte) error {
		return c.ReduceScatter(ctx, mem[0], mem[1], dt, s.Reduction)
	}),
	dag.Broadcast: collectiveImpl(func(ctx context.Context, c device.Collectives, s *dag.CollectiveSpec, _ dag.DType, mem [][]byte) error {
		return c.Broadcast(ctx, mem[0], s.Root)
	}),
	dag.Send: collectiveImpl(func(ctx context.Context, c device.Collectives, s *dag.CollectiveSpec, _ dag.DType, mem [][]byte) error {
		return c.Send(ctx, mem[0], s.Peer)
	}),
	dag.Recv: collectiveImpl(func(ctx context.Context, c device.Collectives, s *dag.CollectiveSpec, _ dag.DType, mem [][]byte) error {
		return c.Recv(ctx, mem[0], s.Peer)
	}),
	dag.Task:  taskImpl,
	dag.While: controlImpl, // control.go
	dag.If:    controlImpl,
}

// collectiveImpl is the entry of a collective kind that call runs through
// the session's world, which step puts in ctx (collective.go).
func collectiveImpl(call collectiveCall) kindImpl {
	return kindImpl{
		check: func(*dag.Op) string { return "" },
		exec: func(ctx context.Context, _ *atomic.Bool, op *dag.Op, _ kernelFunc, mem [][]byte) ([]byte, error) {
			return nil, callCollective(ctx, collectivesOf(ctx), op, mem, call)
		},
		collective: call,
	}
}

func checkTemporary(op *dag.Op) string {
	if b := op.Access[0].Buf; !b.Temporary {
		return fmt.Sprintf("%s of persistent buffer %s", op.Kind, b.Name)
	}
	return ""
}
