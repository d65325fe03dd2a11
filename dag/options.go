package dag

import (
	"fmt"
	"time"
)

// A BufferOption sets a property of a buffer being declared: where it
// lives (OnDevice, PinnedHost, PageableHost, Temporary), its element type
// (Of) and its contents before the run (Zeros, Value, Random, Contents,
// Data, Uninitialized).
type BufferOption interface{ applyBuffer(b *Buffer) }

// bufferFunc is a BufferOption that is a function.
type bufferFunc func(*Buffer)

func (f bufferFunc) applyBuffer(b *Buffer) { f(b) }

// An OpOption sets a property of an op being declared. Every op
// constructor of a Builder takes them last (Launch among its arguments),
// and Op.With applies them to an op already declared:
//
//	b.Fill(x.All(), 0, dag.Name("clear"), dag.High)
//
// The options of every kind are Name, a Priority (High, Low or
// Priority(n)), OnDevice, Cost and After. Others belong to one kind:
// AtMost to a While; TransA, TransB, Alpha, Beta, LeadingDims, Batched,
// TF32, Output, WithEpilogue and Bias to a Gemm; an Access (In, Out, InOut) to a Host or
// Task, whose views they are; RunsOnCPU to a Task. Build reports an
// option given to an op of another kind.
type OpOption interface{ applyOp(o *Op) }

// opFunc is an OpOption that is a function.
type opFunc func(*Op)

func (f opFunc) applyOp(o *Op) { f(o) }

// kindOption is an option of the op kinds in kinds only: what belongs to
// another kind is a Build error naming the option, not a silent no-op.
func kindOption(name string, set func(*Op), kinds ...OpKind) OpOption {
	return opFunc(func(o *Op) {
		for _, k := range kinds {
			if o.Kind == k {
				set(o)
				return
			}
		}
		notFor(o, name, kinds...)
	})
}

// notFor records that option name, of ops of kinds, was given to o.
func notFor(o *Op, name string, kinds ...OpKind) {
	x := o.extra()
	x.optErrs = append(x.optErrs, &Error{Field: "options", Msg: fmt.Sprintf("option %s does not apply to %s ops", name, o.Kind),
		Hint: fmt.Sprintf("it is an option of %s ops", kindNames(kinds))})
}

func kindNames(kinds []OpKind) string {
	s := ""
	for i, k := range kinds {
		if i > 0 {
			s += " and "
		}
		s += k.String()
	}
	return s
}

// Name names an op; names are unique within a graph, bodies of loops and
// branches included. An op without one is named after its kind (or
// kernel) and its position, such as "fill3".
func Name(name string) OpOption { return opFunc(func(o *Op) { o.Name = name }) }

// Cost sets an op's estimated duration for the planner; without it the
// planner's cost model decides.
func Cost(d time.Duration) OpOption { return opFunc(func(o *Op) { o.Cost = d }) }

// After orders an op after ops, beyond what its data implies. An op may
// be after one declared later (give it with Op.With once that one is
// declared); a cycle is a Build error naming its ops.
func After(ops ...*Op) OpOption {
	return opFunc(func(o *Op) { x := o.extra(); x.after = append(x.after, ops...) })
}

// applyOp makes a priority an option: b.Launch(k, grid, block, x, dag.High).
func (p Priority) applyOp(o *Op) { o.Priority = p }

// DeviceOption is what OnDevice returns: an option of buffers and of ops.
type DeviceOption struct{ n int }

// OnDevice places a buffer in the memory of device n, or runs an op on
// device n (by default an op runs on its first device buffer's device).
func OnDevice(n int) DeviceOption { return DeviceOption{n} }

func (d DeviceOption) applyBuffer(b *Buffer) { b.Placement, b.Device = Device, d.n }
func (d DeviceOption) applyOp(o *Op)         { o.Device = d.n }

// applyOp adds a view to a Host or Task op: b.Host(fn, dag.In(x.All())).
func (a Access) applyOp(o *Op) {
	if o.Kind == Host || o.Kind == Task {
		o.Access = append(o.Access, a)
		return
	}
	x := o.extra()
	x.optErrs = append(x.optErrs, &Error{Field: "options", Msg: fmt.Sprintf("%s ops take no access among their options (%s %s)", o.Kind, a.Mode, a.View),
		Hint: "accesses among the options are the views of host and task ops"})
}

// With applies opts to o, an op already declared, and returns o. Op
// constructors take the same options; With is for what a program learns
// after declaring the op, such as an After naming an op declared later.
func (o *Op) With(opts ...OpOption) *Op {
	for _, opt := range opts {
		if opt != nil {
			opt.applyOp(o)
		}
	}
	if o.Kind == Gemm && o.Gemm != nil {
		o.Gemm.setModes(o.Access)
	}
	return o
}

// PinnedHost places a buffer in page-locked host memory.
func PinnedHost() BufferOption { return bufferFunc(func(b *Buffer) { b.Placement = Pinned }) }

// PageableHost places a buffer in ordinary host memory.
func PageableHost() BufferOption { return bufferFunc(func(b *Buffer) { b.Placement = Pageable }) }

// Of sets the element type of a buffer (f32 by default).
func Of(dt DType) BufferOption { return bufferFunc(func(b *Buffer) { b.DType = dt }) }

// Temporary makes a buffer live only inside the run, allocated and freed on streams.
func Temporary() BufferOption { return bufferFunc(func(b *Buffer) { b.Temporary = true }) }

// Uninitialized declares a buffer whose contents before the run are
// deliberately undefined, such as an input the program writes with
// Session.Write: Build then lets ops read it before any op writes it.
func Uninitialized() BufferOption { return bufferFunc(func(b *Buffer) { b.Uninitialized = true }) }

// Zeros sets every byte of a buffer to zero before the run.
func Zeros() BufferOption { return bufferFunc(func(b *Buffer) { b.Init = Init{Kind: InitZeros} }) }

// Value sets every element of a buffer, in its element type, to v.
func Value(v float64) BufferOption {
	return bufferFunc(func(b *Buffer) { b.Init = Init{Kind: InitValue, Value: v} })
}

// Random fills a buffer with seeded uniform values in [0, 1) (integers:
// [0, 256)), the same on every backend.
func Random(seed uint64) BufferOption {
	return bufferFunc(func(b *Buffer) { b.Init = Init{Kind: InitRandom, Seed: seed} })
}

// Contents sets a buffer's initial bytes to data, which must be its size
// (Data takes typed values instead).
func Contents(data []byte) BufferOption {
	return bufferFunc(func(b *Buffer) { b.Init = Init{Kind: InitBytes, Data: data} })
}
