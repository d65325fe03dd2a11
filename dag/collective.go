package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Reduction is how AllReduce and ReduceScatter combine the ranks' elements.
// Its values are NCCL's ncclRedOp_t.
type Reduction uint8

const (
	Sum  Reduction = iota // ncclSum
	Prod                  // ncclProd
	Max                   // ncclMax
	Min                   // ncclMin
	Avg                   // ncclAvg: see CollectiveSpec on rounding

	numReductions
)

var reductionNames = [numReductions]string{Sum: "sum", Prod: "prod", Max: "max", Min: "min", Avg: "avg"}

func (r Reduction) String() string {
	if r < numReductions {
		return reductionNames[r]
	}
	return fmt.Sprintf("Reduction(%d)", uint8(r))
}

// Valid reports whether r is a reduction this package defines.
func (r Reduction) Valid() bool { return r < numReductions }

// ParseReduction returns the Reduction named s (sum, prod, max, min, avg).
func ParseReduction(s string) (Reduction, bool) {
	for i, n := range reductionNames {
		if n == s {
			return Reduction(i), true
		}
	}
	return 0, false
}

// Reductions lists every reduction, in order.
func Reductions() []Reduction {
	rs := make([]Reduction, numReductions)
	for i := range rs {
		rs[i] = Reduction(i)
	}
	return rs
}

// CollectiveSpec is the collective-specific part of an op.
//
// A graph is one rank's program: the same graph runs on every rank of a
// world of N ranks, and its collectives name the rank's own views. The
// world size is not part of the graph (one spec runs with any N); Build
// checks what holds for every N, and Graph.CheckWorld what depends on it.
//
// Sizes. AllReduce and Broadcast use one view of the same size on every
// rank. AllGather's out is world times its in (rank r's in lands at
// out[r*len(in):]); ReduceScatter's in is world times its out (rank r keeps
// the r-th block of the reduced in). The larger view of the two is the one
// the world multiplies; the two views are disjoint (NCCL's in-place forms put
// the small view at a rank-dependent offset, which one program for every
// rank cannot name).
//
// Reductions follow NCCL: sums and products of integers wrap around; Avg of
// integers sums (wrapping) and then divides, truncating toward zero; Avg of
// floats multiplies each rank's value by 1/N in the element type and then
// sums (NCCL's pre-multiplied sum), so float results may differ from
// sum-then-divide in the last bits.
//
// Send and Recv pair up in the order they appear per peer: the k-th Send
// from rank a to rank b delivers into the k-th Recv of rank b from rank a,
// and the two views hold the same number of bytes.
type CollectiveSpec struct {
	Reduction Reduction // AllReduce, ReduceScatter
	Root      int       // Broadcast: the rank whose view every rank receives
	Peer      int       // Send: the rank sent to; Recv: the rank received from
	// Split asks the planner to cut an AllReduce, with the GEMMs that
	// compute its rows and the elementwise launches around it, into this
	// many blocks of rows, so that the reduction of one block runs beside
	// the GEMMs of the next: 0 leaves it to the planner's cost model, 1
	// keeps the op whole (SplitInto).
	Split int
}

// MaxSplit bounds the blocks of rows SplitInto may ask for.
const MaxSplit = 64

// SplitInto asks the planner to cut an AllReduce and the row-wise work
// that computes it into n blocks of rows (CollectiveSpec.Split), 1 to
// MaxSplit. The result is the same; only the overlap changes.
func SplitInto(n int) OpOption {
	return kindOption("SplitInto", func(o *Op) {
		if n < 1 || n > MaxSplit {
			x := o.extra()
			x.optErrs = append(x.optErrs, &Error{Field: "split", Msg: fmt.Sprintf("split %d is out of range", n),
				Hint: fmt.Sprintf("use 1 (whole) to %d blocks of rows", MaxSplit)})
			return
		}
		o.Collective.Split = n
	}, AllReduce)
}

// CollectiveDTypes are the element types collectives take (NCCL's uint8,
// int32, int64, float32, float64).
var collectiveDTypes = [...]DType{U8, I32, I64, F16, BF16, F32, F64}

// IsCollective reports whether k is one of the collective kinds (send and
// recv included).
func (k OpKind) IsCollective() bool { return k.Valid() && kindTable[k].Class == CollectiveClass }

// AllReduce reduces v across the ranks in place: afterwards every rank's v
// holds the reduction of every rank's v.
func (g *Builder) AllReduce(v View, r Reduction, opts ...OpOption) *Op {
	o := g.op(AllReduce, InOut(v))
	o.Collective = &CollectiveSpec{Reduction: r}
	return o.With(opts...)
}

// AllGather concatenates every rank's in into out, rank by rank; out is
// world times as large as in.
func (g *Builder) AllGather(in, out View, opts ...OpOption) *Op {
	o := g.op(AllGather, In(in), Out(out))
	o.Collective = &CollectiveSpec{}
	return o.With(opts...)
}

// ReduceScatter reduces in across the ranks and leaves the r-th block of the
// result in rank r's out; in is world times as large as out.
func (g *Builder) ReduceScatter(in, out View, r Reduction, opts ...OpOption) *Op {
	o := g.op(ReduceScatter, In(in), Out(out))
	o.Collective = &CollectiveSpec{Reduction: r}
	return o.With(opts...)
}

// Broadcast copies rank root's v into v of every other rank.
func (g *Builder) Broadcast(v View, root int, opts ...OpOption) *Op {
	o := g.op(Broadcast, InOut(v))
	o.Collective = &CollectiveSpec{Root: root}
	return o.With(opts...)
}

// Send sends v to rank to, which receives it with a Recv from this rank.
func (g *Builder) Send(v View, to int, opts ...OpOption) *Op {
	o := g.op(Send, In(v))
	o.Collective = &CollectiveSpec{Peer: to}
	return o.With(opts...)
}

// Recv receives into v what rank from sends with a Send to this rank.
func (g *Builder) Recv(v View, from int, opts ...OpOption) *Op {
	o := g.op(Recv, Out(v))
	o.Collective = &CollectiveSpec{Peer: from}
	return o.With(opts...)
}

// collectiveCheck is the Build check of a collective kind: what every
// collective checks, then sizes (for the kinds of two views) and params,
// the kind's own, each nil when the kind has none.
func collectiveCheck(sizes func(in, out Access, fail failFunc), params func(o *Op, c *CollectiveSpec, fail failFunc)) kindCheck {
	return func(ch *checker, o *Op) {
		fail := ch.failer(o)
		c := o.Collective
		if c == nil {
			fail("", "declare collectives with the Builder's methods", "%s has no collective parameters", o.Kind)
			return
		}
		for _, a := range o.Access {
			b := a.Buf
			if b.Placement != Device {
				fail("", "collectives work on device memory; copy the data to a device buffer first",
					"%s is %s memory", b.Name, placeName(b))
			}
			if !supportedCollectiveDType(b.DType) {
				fail("", "use u8, i32, i64, f16, bf16, f32 or f64", "%s has element type %s, which collectives do not take", b.Name, b.DType)
			}
			es := b.DType.Size()
			if a.Offset%es != 0 || a.Size%es != 0 {
				fail("", "name whole elements", "view %s is not a whole number of %s elements (%d bytes)", a.View, b.DType, es)
			}
		}
		if len(o.Access) == 2 {
			in, out := o.Access[0], o.Access[1]
			if in.Buf.DType != out.Buf.DType {
				fail("", "give both buffers one element type", "in %s is %s, out %s is %s", in.View, in.Buf.DType, out.View, out.Buf.DType)
			}
			if in.Overlaps(out.View) {
				fail("", "use disjoint views: the in-place form needs rank-dependent offsets", "in %s and out %s overlap", in.View, out.View)
			}
			if sizes != nil {
				sizes(in, out, fail)
			}
		}
		if params != nil {
			params(o, c, fail)
		}
	}
}

// multiple checks that large is a whole multiple of small.
func multiple(small, large Access, what string, fail failFunc) {
	if large.Size%small.Size != 0 {
		fail("", what, "%s (%d bytes) is not a whole multiple of %s (%d bytes)", large.View, large.Size, small.View, small.Size)
	}
}

func gatherSizes(in, out Access, fail failFunc) {
	multiple(in, out, "out must be world times in", fail)
}
func scatterSizes(in, out Access, fail failFunc) {
	multiple(out, in, "in must be world times out", fail)
}

func reductionParam(_ *Op, c *CollectiveSpec, fail failFunc) {
	if !c.Reduction.Valid() {
		fail("op", "use sum, prod, max, min or avg", "unknown reduction %d", c.Reduction)
	}
}

func rootParam(_ *Op, c *CollectiveSpec, fail failFunc) {
	if c.Root < 0 {
		fail("root", "name a rank from 0", "root rank %d is negative", c.Root)
	}
}

// peerParam checks the peer of send or recv, whose spec field is field.
func peerParam(field string) func(*Op, *CollectiveSpec, failFunc) {
	return func(_ *Op, c *CollectiveSpec, fail failFunc) {
		if c.Peer < 0 {
			fail(field, "name a rank from 0", "peer rank %d is negative", c.Peer)
		}
	}
}

func gatherWorld(o *Op, n int, fail failFunc) {
	if in, out := o.Access[0], o.Access[1]; out.Size != in.Size*int64(n) {
		fail("", fmt.Sprintf("make out %d bytes (in times the world)", in.Size*int64(n)),
			"out %s holds %d bytes; in %s times %d ranks is %d", out.View, out.Size, in.View, n, in.Size*int64(n))
	}
}

func scatterWorld(o *Op, n int, fail failFunc) {
	if in, out := o.Access[0], o.Access[1]; in.Size != out.Size*int64(n) {
		fail("", fmt.Sprintf("make in %d bytes (out times the world)", out.Size*int64(n)),
			"in %s holds %d bytes; out %s times %d ranks is %d", in.View, in.Size, out.View, n, out.Size*int64(n))
	}
}

func rootWorld(o *Op, n int, fail failFunc) {
	if o.Collective.Root >= n {
		fail("root", fmt.Sprintf("name a rank below %d", n), "root rank %d is not in a world of %d", o.Collective.Root, n)
	}
}

func peerWorld(field string) func(*Op, int, failFunc) {
	return func(o *Op, n int, fail failFunc) {
		if o.Collective.Peer >= n {
			fail(field, fmt.Sprintf("name a rank below %d", n), "peer rank %d is not in a world of %d", o.Collective.Peer, n)
		}
	}
}

func reductionSign(o *Op) string { return ", " + o.Collective.Reduction.String() }
func rootSign(o *Op) string      { return fmt.Sprintf(", root %d", o.Collective.Root) }
func peerSign(dir string) func(*Op) string {
	return func(o *Op) string { return fmt.Sprintf(", %s %d", dir, o.Collective.Peer) }
}

func supportedCollectiveDType(d DType) bool {
	for _, t := range collectiveDTypes {
		if t == d {
			return true
		}
	}
	return false
}

// CheckWorld checks the graph's collectives against a world of n ranks:
// roots and peers name ranks below n, and the views of AllGather and
// ReduceScatter differ in size by exactly n. The error joins one *Error per
// problem, each naming its op.
func (gr *Graph) CheckWorld(n int) error {
	if n < 1 {
		return &Error{Msg: fmt.Sprintf("world of %d ranks", n), Hint: "a world has at least one rank"}
	}
	var errs []error
	for _, o := range gr.Ops {
		if !o.Kind.IsCollective() {
			continue
		}
		fail := func(field, hint, format string, a ...any) {
			errs = append(errs, &Error{Op: o.Name, Field: field, Msg: fmt.Sprintf(format, a...), Hint: hint})
		}
		if w := kindTable[o.Kind].world; w != nil {
			w(o, n, fail)
		}
	}
	return errors.Join(errs...)
}

// Ordered returns the graph's ops of Ordered kinds in the order every rank
// issues them (the order they were declared in).
func (gr *Graph) Ordered() []*Op {
	var out []*Op
	for _, o := range gr.Ops {
		if o.Kind.Info().Ordered {
			out = append(out, o)
		}
	}
	return out
}

// CollectiveSequence describes the collectives (AllReduce, AllGather,
// ReduceScatter, Broadcast) in the order every rank issues them, one line
// each with what must agree across ranks: kind, element type, element
// counts, reduction, root. Ranks compare their sequences before running so
// that a mismatch is refused instead of deadlocking. Send and Recv are left
// out: their peers differ by rank by design, and they are paired per peer
// when they run.
func (gr *Graph) CollectiveSequence() []string {
	var out []string
	for _, o := range gr.Ops {
		if info := o.Kind.Info(); info.Class == CollectiveClass && !info.PointToPoint {
			out = append(out, CollectiveSignature(o))
		}
	}
	return out
}

// CollectiveSignature is one line of CollectiveSequence: for example
// "all_reduce grads: 1024 x f32, sum".
func CollectiveSignature(o *Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s:", o.Kind, o.Name)
	for i, a := range o.Access {
		if i > 0 {
			b.WriteString(" ->")
		}
		fmt.Fprintf(&b, " %d x %s", a.Size/a.Buf.DType.Size(), a.Buf.DType)
	}
	if sign := kindTable[o.Kind].sign; sign != nil {
		b.WriteString(sign(o))
	}
	return b.String()
}

// chainOrdered makes each op of an Ordered kind depend on the one before
// it, so that no topological order (and no plan that respects Deps)
// reorders them. ops are in declaration order, with IDs set.
func chainOrdered(ops []*Op) {
	var prev *Op
	for _, o := range ops {
		if !o.Kind.Info().Ordered {
			continue
		}
		if prev != nil && !slices.Contains(o.Deps, int32(prev.ID)) {
			o.Deps = append(o.Deps, int32(prev.ID))
		}
		prev = o
	}
}
