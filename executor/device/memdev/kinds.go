package memdev

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// kernels are the builtins this backend runs, on f32 elements (set_flag
// also on f64), computed exactly as the cpu backend computes them.
var kernels = map[*dag.Kernel]func(args []dag.Arg, mem [][]byte, stop func() bool) error{
	dag.Empty: func([]dag.Arg, [][]byte, func() bool) error { return nil },
	dag.Spin: func(args []dag.Arg, _ [][]byte, stop func() bool) error {
		d := time.Duration(args[0].Float * float64(time.Microsecond))
		for start := time.Now(); time.Since(start) < d && !stop(); {
		}
		return nil
	},
	dag.Iota: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		x, start := mem[args[0].Access], float32(args[1].Float)
		for i := range len(x) / 4 {
			setF32(x, i, start+float32(i))
		}
		return nil
	},
	dag.Scale: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		x, alpha := mem[args[0].Access], float32(args[1].Float)
		for i := range len(x) / 4 {
			setF32(x, i, f32(x, i)*alpha)
		}
		return nil
	},
	dag.Axpy: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		y, x, alpha := mem[args[0].Access], mem[args[1].Access], float32(args[2].Float)
		for i := range min(len(y), len(x)) / 4 {
			setF32(y, i, f32(y, i)+float32(alpha*f32(x, i)))
		}
		return nil
	},
	dag.Add: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		c, a, b := mem[args[0].Access], mem[args[1].Access], mem[args[2].Access]
		for i := range min(len(c), len(a), len(b)) / 4 {
			setF32(c, i, f32(a, i)+f32(b, i))
		}
		return nil
	},
	dag.ReduceSum: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		out, in := mem[args[0].Access], mem[args[1].Access]
		var sum float64
		for i := range len(in) / 4 {
			sum += float64(f32(in, i))
		}
		if len(out) >= 4 {
			setF32(out, 0, float32(sum))
		}
		return nil
	},
	dag.SetFlag: func(args []dag.Arg, mem [][]byte, _ func() bool) error {
		flag, x := mem[args[0].Access], mem[args[1].Access]
		var v float64
		switch len(x) {
		case 4:
			v = float64(f32(x, 0))
		case 8:
			v = math.Float64frombits(binary.LittleEndian.Uint64(x))
		default:
			return fmt.Errorf("set_flag reads one element of x, not %d bytes", len(x))
		}
		var set uint32
		if v > args[2].Float {
			set = 1
		}
		binary.LittleEndian.PutUint32(flag, set)
		return nil
	},
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func setF32(b []byte, i int, v float32) { binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v)) }

// supported says why this backend cannot run op, or nil when it can.
func supported(op *dag.Op) error {
	switch op.Kind {
	case dag.Launch:
		k := op.Launch.Kernel
		if k.Source != dag.Builtin || kernels[dag.LookupBuiltin(k.Name)] == nil {
			return fmt.Errorf("kernel %s is not one of its builtins: %w", k.Name, errors.ErrUnsupported)
		}
		if dt := k.ElemDType(); dt != dag.F32 && (k.Base() != dag.SetFlag || dt != dag.F64) {
			return fmt.Errorf("kernel %s on %s elements: %w", k.Name, dt, errors.ErrUnsupported)
		}
	case dag.Gemm:
		return fmt.Errorf("gemm: %w", errors.ErrUnsupported)
	case dag.Task:
		if op.Task == nil || op.Task.Func == nil || !op.Task.OnCPU {
			return fmt.Errorf("the task does not run on the CPU (dag.RunsOnCPU): %w", errors.ErrUnsupported)
		}
	}
	return nil
}

// run does op; it runs under mu.
func (s *Session) run(op *dag.Op) error {
	info := op.Kind.Info()
	switch {
	case info.Lifetime == dag.Allocates:
		buf := op.Buffer()
		if s.mem[buf.ID] != nil {
			return fmt.Errorf("temporary %s is allocated already", buf.Name)
		}
		s.mem[buf.ID] = make([]byte, buf.Size)
		return nil
	case info.Lifetime == dag.Frees:
		buf := op.Buffer()
		if s.mem[buf.ID] == nil {
			return fmt.Errorf("temporary %s is not allocated", buf.Name)
		}
		s.mem[buf.ID] = nil
		return nil
	case info.Body != dag.NoBody:
		return s.control(op) // control.go
	}
	mem := make([][]byte, len(op.Access))
	for i, a := range op.Access {
		m := s.mem[a.Buf.ID]
		if m == nil {
			return fmt.Errorf("temporary %s is not allocated", a.Buf.Name)
		}
		mem[i] = m[a.Offset : a.Offset+a.Size]
	}
	if info.Class == dag.CollectiveClass {
		return s.collective(op, mem)
	}
	switch op.Kind {
	case dag.Copy:
		copy(mem[1], mem[0])
	case dag.Fill:
		dag.FillElems(mem[0], op.Access[0].Buf.DType, op.FillValue)
	case dag.Memset2D:
		op.Memset2DRows(func(start, end int64) { dag.FillElems(mem[0][start:end], op.Access[0].Buf.DType, op.FillValue) })
	case dag.Host:
		return op.HostFunc(context.Background(), mem)
	case dag.Task:
		return op.Task.Func(context.Background(), dag.TaskStream{Device: op.Device, Host: true, Mem: mem})
	case dag.Launch:
		return kernels[dag.LookupBuiltin(op.Launch.Kernel.Name)](op.Launch.Args, mem, s.stop.Load)
	default:
		return fmt.Errorf("the mem backend has no %s: %w", op.Kind, errors.ErrUnsupported)
	}
	return nil
}

// collective runs op through the session's world.
func (s *Session) collective(op *dag.Op, mem [][]byte) error {
	if s.world == nil || s.world.Comm == nil {
		return fmt.Errorf("%s outside a world: open the session with executor.OpenWorld", op.Kind)
	}
	c, spec, ctx := s.world.Comm, op.Collective, context.Background()
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
	return fmt.Errorf("the mem backend has no collective %s: %w", op.Kind, errors.ErrUnsupported)
}
