package cpu

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dagrun/dagrun/dag"
)

// memory is a session's memory: its graph's buffers (in arenas, if the
// plan placed its temporaries there) and the kernels its launches run.
// Persistent buffers are made at Open with their initial contents,
// temporary ones by Alloc ops and dropped by Free ops; what each op kind
// does is its entry in kinds.
type memory struct {
	g      *dag.Graph
	mem    [][]byte // by buffer ID; nil for a temporary that is not allocated
	arenas *arenas  // nil unless the temporaries live in arenas
	// live and high are the bytes of temporaries allocated now and the
	// most allocated at once, by memory (MemoryHighWater).
	live, high map[int]int64
	kernels    []kernelFunc
}

// prepare checks that every op of g can run here and finds the Go function
// of every launch, by op number (index): the graph's ops and then those of
// its loops' and branches' bodies (dag.Graph.OpAt). Graphs from dag.Build pass every check but the
// kernel's source; the others keep a hand-made graph from making a worker
// index out of range.
func prepare(g *dag.Graph) ([]kernelFunc, error) {
	kernels := make([]kernelFunc, len(g.Ops)+len(g.Nested))
	var errs []error
	refused := map[*dag.Kernel]bool{}
	for i := range kernels {
		op := g.OpAt(i)
		if op == nil || i < len(g.Ops) && op.ID != i || i >= len(g.Ops) && op.Index != i {
			errs = append(errs, fmt.Errorf("cpu: op %d of the graph is missing or has another ID; build graphs with dag.Builder", i))
			continue
		}
		if err := checkOp(g, op); err != nil {
			errs = append(errs, err)
			continue
		}
		if prep := kinds[op.Kind].kernel; prep != nil {
			kernels[i], _ = prep(op) // checkOp has checked it
			continue
		}
		k := op.Kernel()
		if k == nil {
			continue
		}
		if k.Source != dag.Builtin {
			if !refused[k] {
				refused[k] = true
				errs = append(errs, &dag.Error{Kernel: k.Name, Field: "source",
					Msg:  fmt.Sprintf("kernel %s is CUDA code (%s) and cannot run on the cpu backend", k.Name, k.Source),
					Hint: "run it with --backend cuda, or use a builtin kernel"})
			}
			continue
		}
		f, err := builtin(op)
		if err != nil {
			errs = append(errs, &dag.Error{Op: op.Name, Kernel: k.Name, Msg: err.Error()})
			continue
		}
		kernels[i] = f
	}
	return kernels, errors.Join(errs...)
}

// checkOp checks the shape of op: its accesses lie inside buffers of g,
// and it has what its kind needs.
func checkOp(g *dag.Graph, op *dag.Op) error {
	bad := func(format string, a ...any) error {
		return &dag.Error{Op: op.Name, Msg: fmt.Sprintf(format, a...)}
	}
	for i, a := range op.Access {
		if a.Buf == nil || a.Buf.ID < 0 || a.Buf.ID >= len(g.Buffers) || g.Buffers[a.Buf.ID] != a.Buf {
			return bad("access %d names a buffer the graph does not hold", i)
		}
		if a.Offset < 0 || a.Size < 0 || a.End() > a.Buf.Size {
			return bad("view %s is outside the %d bytes of %s", a.View, a.Buf.Size, a.Buf.Name)
		}
	}
	impl, ok := kinds[op.Kind]
	if !ok {
		return bad("unknown kind %s", op.Kind)
	}
	if n := op.Kind.Info().Accesses; n >= 0 && len(op.Access) != n {
		return bad("%s has %d accesses, not %d", op.Kind, len(op.Access), n)
	}
	if msg := impl.check(op); msg != "" {
		return bad("%s", msg)
	}
	return nil
}

// resolve gathers the bytes op works on into w.mem. It runs under the
// lock, which orders it after every Alloc and Free that came before.
func (mm *memory) resolve(w *worker, op *dag.Op) error {
	w.mem = w.mem[:0]
	if mm.inArena(op) { // arena.go
		return nil
	}
	if r := kinds[op.Kind].resolve; r != nil {
		return r(mm, op)
	}
	for _, a := range op.Access {
		m := mm.mem[a.Buf.ID]
		if m == nil {
			return fmt.Errorf("temporary %s is not allocated: used before its alloc or after its free", a.Buf.Name)
		}
		w.mem = append(w.mem, m[a.Offset:a.End():a.End()])
	}
	return nil
}

// exec does op on mem, the bytes of its accesses. An Alloc returns the
// memory it made, for commit to install.
func exec(ctx context.Context, stop *atomic.Bool, op *dag.Op, kernel kernelFunc, mem [][]byte) ([]byte, error) {
	return kinds[op.Kind].exec(ctx, stop, op, kernel, mem)
}

// host runs a host step, turning a panic in it into an error.
func host(ctx context.Context, f dag.HostFunc, mem [][]byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("host step panicked: %v", p)
		}
	}()
	return f(ctx, mem)
}

// commit makes an Alloc's or Free's effect visible to later ops. It runs
// under the lock.
func (mm *memory) commit(op *dag.Op, made []byte) error {
	if mm.inArena(op) { // arena.go
		return nil
	}
	if c := kinds[op.Kind].commit; c != nil {
		return c(mm, op, made)
	}
	return nil
}

// index is op's number among the opened graph's ops and those of its
// bodies (dag.Op.Index): what kernels, spans and bodies are kept by. A
// graph's own op goes by its ID, which a hand-made graph sets alone.
func (mm *memory) index(op *dag.Op) int {
	if op.Index >= len(mm.g.Ops) {
		return op.Index
	}
	return op.ID
}
