package dag

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// GemmShape is the size of a matrix product: op(A) is M x K, op(B) is K x N,
// and C (and D) are M x N.
type GemmShape struct{ M, N, K int64 }

// GemmSpec is the GEMM-specific part of a Gemm op:
//
//	D = Alpha * op(A) op(B) + Beta * C
//
// over row-major matrices (as NumPy and PyTorch store them), where op(X) is
// X or, with TransX, its transpose. Without a separate output D is C itself
// (C = Alpha op(A) op(B) + Beta C). f16 and bf16 products accumulate in f32;
// f32 products are plain f32 unless TF32 allows tensor-float-32 inputs.
//
// The accesses of a Gemm op are A and B (read), C (written; also read when
// Beta is not zero), and, with a separate output, C (read) and D (written).
// Build fills in the defaults: leading dimensions from the shapes, Batch 1,
// and strides that pack the batch's matrices one after another.
type GemmSpec struct {
	GemmShape
	TransA, TransB bool
	Alpha, Beta    float64
	// LDA, LDB and LDC are the row pitches, in elements, of A, B and C (D
	// shares C's layout): at least the stored rows' length; 0 takes it.
	LDA, LDB, LDC int64
	// Batch is the number of products (0 counts as 1); StrideA, StrideB
	// and StrideC are the distances, in elements, from one matrix of the
	// batch to the next (0: packed, rows times the leading dimension).
	Batch                     int64
	StrideA, StrideB, StrideC int64
	TF32                      bool
	SeparateD                 bool // Access[3] is D, an output other than C
	// Epilogue is applied to every element of the result before it is
	// stored (see Epilogue); one with a bias reads it as the op's last
	// access (BiasAccess).
	Epilogue Epilogue
	// LeaveSMs is how many of the device's SMs the GEMM leaves to work
	// that runs beside it (a collective's kernels): a library tunes its
	// tiles for the device's SMs less these, so that its waves do not
	// wait on SMs another kernel holds. The planner's split pass sets it;
	// 0 uses every SM.
	LeaveSMs int
}

// Indices of a Gemm op's accesses.
const (
	GemmA = 0
	GemmB = 1
	GemmC = 2
	GemmD = 3 // only with SeparateD
)

// GemmMatrix is how one operand of a GEMM is stored: Rows x Cols elements,
// row-major, LD elements from one row to the next and Stride from one
// matrix of the batch to the next.
type GemmMatrix struct{ Rows, Cols, LD, Stride int64 }

// LayoutA, LayoutB and LayoutC are the stored layouts of the operands
// (LayoutC is also D's).
func (s *GemmSpec) LayoutA() GemmMatrix {
	if s.TransA {
		return GemmMatrix{s.K, s.M, s.LDA, s.StrideA}
	}
	return GemmMatrix{s.M, s.K, s.LDA, s.StrideA}
}

// LayoutB is the stored layout of B (see LayoutA).
func (s *GemmSpec) LayoutB() GemmMatrix {
	if s.TransB {
		return GemmMatrix{s.N, s.K, s.LDB, s.StrideB}
	}
	return GemmMatrix{s.K, s.N, s.LDB, s.StrideB}
}

// LayoutC is the stored layout of C and D (see LayoutA).
func (s *GemmSpec) LayoutC() GemmMatrix { return GemmMatrix{s.M, s.N, s.LDC, s.StrideC} }

// layout is the stored layout of the operand at access i: A, B, else C
// (D's is C's).
func (s *GemmSpec) layout(i int) GemmMatrix {
	switch i {
	case GemmA:
		return s.LayoutA()
	case GemmB:
		return s.LayoutB()
	}
	return s.LayoutC()
}

// OutAccess is the index of the access the GEMM writes: D or C.
func (s *GemmSpec) OutAccess() int {
	if s.SeparateD {
		return GemmD
	}
	return GemmC
}

// Flops is the number of floating-point operations of the product, 2 M N K
// per matrix of the batch (the Beta C term is not counted, as cuBLAS does).
func (s *GemmSpec) Flops() float64 {
	return 2 * float64(s.M) * float64(s.N) * float64(s.K) * float64(max(s.Batch, 1))
}

func (s *GemmSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%dx%dx%d", s.M, s.N, s.K)
	if s.TransA {
		b.WriteString(" tA")
	}
	if s.TransB {
		b.WriteString(" tB")
	}
	if s.Batch > 1 {
		fmt.Fprintf(&b, " x%d", s.Batch)
	}
	if s.Epilogue != NoEpilogue {
		fmt.Fprintf(&b, " +%s", s.Epilogue)
	}
	if s.LeaveSMs > 0 {
		fmt.Fprintf(&b, " leaving %d SMs", s.LeaveSMs)
	}
	return b.String()
}

// GemmDTypes are the element types a Gemm op takes.
var gemmDTypes = []DType{F32, F64, F16, BF16}

// gemmOption is an option of Gemm ops only. It is one closure (as
// kindOption's would be two and a list): a spec loads one per GEMM.
func gemmOption(name string, set func(s *GemmSpec, o *Op)) OpOption {
	return opFunc(func(o *Op) {
		if s := gemmOf(o, name); s != nil {
			set(s, o)
		}
	})
}

// gemmOf is o's GemmSpec, made where o was not made by Gemm (Build then
// reports its accesses); nil, with the error noted, when o is of another
// kind than option name's.
func gemmOf(o *Op, name string) *GemmSpec {
	if o.Kind != Gemm {
		notFor(o, name, Gemm)
		return nil
	}
	if o.Gemm == nil {
		o.Gemm = &GemmSpec{Alpha: 1}
	}
	return o.Gemm
}

// viewOption is an option of Gemm ops that sets a view: a value rather
// than a closure around one, so that making it is one allocation.
type viewOption struct {
	name string
	set  func(s *GemmSpec, o *Op, v View)
	v    View
}

func (g viewOption) applyOp(o *Op) {
	if s := gemmOf(o, g.name); s != nil {
		g.set(s, o, g.v)
	}
}

// TransA and TransB take op(A) = A^T or op(B) = B^T: the stored A is K x M,
// the stored B N x K.
func TransA() OpOption { return gemmOption("TransA", func(s *GemmSpec, _ *Op) { s.TransA = true }) }

// TransB takes op(B) = B^T (see TransA).
func TransB() OpOption { return gemmOption("TransB", func(s *GemmSpec, _ *Op) { s.TransB = true }) }

// LeavingSMs has the GEMM leave n of the device's SMs to work that runs
// beside it (GemmSpec.LeaveSMs).
func LeavingSMs(n int) OpOption {
	return gemmOption("LeavingSMs", func(s *GemmSpec, o *Op) {
		if n < 0 {
			x := o.extra()
			x.optErrs = append(x.optErrs, &Error{Field: "options", Msg: fmt.Sprintf("LeavingSMs(%d) leaves fewer than none", n), Hint: "leave 0 or more SMs"})
			return
		}
		s.LeaveSMs = n
	})
}

// Alpha and Beta set the scale factors (1 and 0 by default).
func Alpha(v float64) OpOption { return gemmOption("Alpha", func(s *GemmSpec, _ *Op) { s.Alpha = v }) }

// Beta sets the factor of C (0 by default: C is not read).
func Beta(v float64) OpOption { return gemmOption("Beta", func(s *GemmSpec, _ *Op) { s.Beta = v }) }

// LeadingDims sets the row pitches of A, B and C in elements; 0 keeps one's default.
func LeadingDims(lda, ldb, ldc int64) OpOption {
	return gemmOption("LeadingDims", func(s *GemmSpec, _ *Op) { s.LDA, s.LDB, s.LDC = lda, ldb, ldc })
}

// Batched makes the op n products over matrices that follow one another at
// the given strides, in elements (0: packed).
func Batched(n, strideA, strideB, strideC int64) OpOption {
	return gemmOption("Batched", func(s *GemmSpec, _ *Op) {
		s.Batch, s.StrideA, s.StrideB, s.StrideC = n, strideA, strideB, strideC
	})
}

// TF32 lets an f32 GEMM round its inputs to tensor-float-32.
func TF32() OpOption { return gemmOption("TF32", func(s *GemmSpec, _ *Op) { s.TF32 = true }) }

// Output writes the result to d instead of C: D = alpha op(A) op(B) + beta C,
// so that C (a residual, say) is only read.
func Output(d View) OpOption { return viewOption{"Output", setOutput, d} }

func setOutput(s *GemmSpec, o *Op, d View) {
	if !s.SeparateD {
		s.SeparateD = true
		o.Access = append(o.Access, Access{d, Write})
		orderGemmAccesses(o.Access) // before a bias given earlier
	} else if len(o.Access) > GemmD {
		o.Access[GemmD].View = d
	}
}

// Gemm multiplies: c = alpha op(a) op(b) + beta c (or d = ... with Output),
// row-major, with shape's M, N and K. Options set transposes, scale
// factors, leading dimensions, batches, TF32 and an epilogue
// (WithEpilogue, Bias), beside those of every op.
func (g *Builder) Gemm(c, a, b View, shape GemmShape, opts ...OpOption) *Op {
	// Room for the views options add (D, a bias).
	n := 3
	for _, opt := range opts {
		if _, ok := opt.(viewOption); ok {
			n++
		}
	}
	o := g.op(Gemm, append(g.accesses(n), In(a), In(b), Access{c, Write})...)
	o.Gemm = g.newGemm()
	*o.Gemm = GemmSpec{GemmShape: shape, Alpha: 1}
	return o.With(opts...)
}

// setModes puts the accesses in their places (orderGemmAccesses) and
// gives C the mode the options make it: read beside a separate D, read
// and written when beta scales it, else only written.
func (s *GemmSpec) setModes(acc []Access) {
	if len(acc) <= GemmC {
		return
	}
	orderGemmAccesses(acc)
	switch {
	case s.SeparateD:
		acc[GemmC].Mode = Read
	case s.Beta != 0:
		acc[GemmC].Mode = ReadWrite
	default:
		acc[GemmC].Mode = Write
	}
}

// Limits of a GEMM: cuBLASLt takes the batch count as an int32; sizes are
// kept to int32 as well so every backend indexes them safely.
const maxGemmDim = math.MaxInt32

// checkGemm checks a Gemm op and fills in its defaults.
func checkGemm(o *Op, fail func(field, hint, format string, a ...any)) {
	s := o.Gemm
	if s == nil {
		fail("", "declare GEMMs with Builder.Gemm", "gemm op has no GemmSpec")
		return
	}
	if !s.Epilogue.Valid() {
		fail("epilogue", "use one of "+strings.Join(EpilogueNames(), ", "), "unknown epilogue %d", uint8(s.Epilogue))
		return
	}
	if want := gemmAccesses(s); len(o.Access) != want {
		hint := "declare GEMMs with Builder.Gemm"
		field := ""
		switch {
		case s.Epilogue.HasBias() && len(o.Access) == want-1:
			field, hint = "bias", "give the vector the epilogue adds (Bias)"
		case !s.Epilogue.HasBias() && len(o.Access) == want+1 && !o.Access[want].Mode.Writes():
			field, hint = "bias", "a bias goes with the epilogues bias, bias_gelu and bias_relu"
		}
		fail(field, hint, "gemm has %d accesses, wants %d (%s)", len(o.Access), want, accessesText(s))
		return
	}
	names := []string{"a", "b", "c", "d"}
	dt := o.Access[GemmA].Buf.DType
	ok := true
	matrices := 3
	if s.SeparateD {
		matrices = 4
	}
	for i, a := range o.Access[:matrices] {
		field := names[i]
		if a.Buf.DType != dt {
			fail(field, "give a, b, c (and d) one dtype", "%s is %s but a is %s", a.Buf.Name, a.Buf.DType, dt)
			ok = false
		}
		if a.Buf.Placement != Device || a.Buf.Device != o.Device {
			fail(field, fmt.Sprintf("copy it to a buffer on device %d first", o.Device),
				"%s is %s memory, not memory of device %d", a.Buf.Name, placeName(a.Buf), o.Device)
			ok = false
		}
	}
	if !ok {
		return
	}
	es := dt.Size()
	supported := false
	for _, d := range gemmDTypes {
		supported = supported || d == dt
	}
	if !supported {
		fail("dtype", "use f32, f64, f16 or bf16", "gemm does not take %s matrices", dt)
		return
	}
	if s.TF32 && dt != F32 {
		fail("tf32", "tf32 applies to f32 GEMMs only", "tf32 with %s matrices", dt)
	}
	if math.IsNaN(s.Alpha) || math.IsInf(s.Alpha, 0) {
		fail("alpha", "", "alpha %g is not finite", s.Alpha)
	}
	if math.IsNaN(s.Beta) || math.IsInf(s.Beta, 0) {
		fail("beta", "", "beta %g is not finite", s.Beta)
	}
	if s.Batch == 0 {
		s.Batch = 1
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"m", s.M}, {"n", s.N}, {"k", s.K}, {"batch", s.Batch}} {
		if d.v < 1 || d.v > maxGemmDim {
			fail(d.name, fmt.Sprintf("%s is from 1 to %d", d.name, maxGemmDim), "%s = %d is out of range", d.name, d.v)
			ok = false
		}
	}
	if !ok {
		return
	}
	// Leading dimensions and strides, then what each view must hold.
	type operand struct {
		ld, stride *int64
		ldName     string
	}
	ops := [...]operand{
		{&s.LDA, &s.StrideA, "lda"},
		{&s.LDB, &s.StrideB, "ldb"},
		{&s.LDC, &s.StrideC, "ldc"},
	}
	for i, p := range ops {
		l := s.layout(i)
		if *p.ld == 0 {
			*p.ld = l.Cols
		}
		if *p.ld < l.Cols || *p.ld > maxGemmDim {
			fail(p.ldName, fmt.Sprintf("the stored matrix has %d columns: %s is from %d to %d", l.Cols, p.ldName, l.Cols, maxGemmDim),
				"%s = %d is out of range", p.ldName, *p.ld)
			ok = false
			continue
		}
		if *p.stride == 0 {
			*p.stride = l.Rows * *p.ld // both below 2^31: no overflow
		}
		if *p.stride < 0 {
			strideName := "stride_" + names[i]
			fail(strideName, "strides count elements and are positive", "%s = %d is negative", strideName, *p.stride)
			ok = false
		}
	}
	if !ok {
		return
	}
	// span is the elements one operand's batch reaches:
	// (batch-1)*stride + (rows-1)*ld + cols, checked for overflow.
	span := func(l GemmMatrix) (int64, bool) {
		a, ok1 := mulAdd(s.Batch-1, l.Stride, l.Cols)
		b, ok2 := mulAdd(l.Rows-1, l.LD, a)
		return b, ok1 && ok2
	}
	for ai := range matrices {
		v := o.Access[ai].View
		field := names[ai]
		if v.Offset%es != 0 || v.Size%es != 0 {
			fail(field, fmt.Sprintf("%s elements are %d bytes", dt, es), "view %s is not a whole number of %s elements", v, dt)
			ok = false
			continue
		}
		l := s.layout(ai) // D's is C's
		need, fits := span(l)
		if !fits || need > v.Size/es {
			fail(field, fmt.Sprintf("a %dx%d matrix with leading dimension %d%s needs %s elements",
				l.Rows, l.Cols, l.LD, batchText(s.Batch, l.Stride), spanText(need, fits)),
				"view %s holds %d %s elements, too few for the gemm %s", v, v.Size/es, dt, s)
			ok = false
		}
	}
	if !ok {
		return
	}
	if c := s.LayoutC(); s.Batch > 1 && !batchesDisjoint(c, s.Batch) {
		fail("stride_c", fmt.Sprintf("make stride_c at least %d (one matrix after another)", (c.Rows-1)*c.LD+c.Cols),
			"stride_c = %d makes the batch's output matrices overlap", c.Stride)
	}
	out := o.Access[s.OutAccess()]
	outName := names[s.OutAccess()]
	for _, in := range []int{GemmA, GemmB} {
		if out.Overlaps(o.Access[in].View) {
			fail(outName, "write the product to memory the GEMM does not read", "output %s overlaps %s %s", out.View, names[in], o.Access[in].View)
		}
	}
	if s.SeparateD {
		if c := o.Access[GemmC].View; c != out.View && c.Overlaps(out.View) {
			fail("d", "make d either exactly c or disjoint from it", "d %s overlaps c %s partly", out.View, c)
		}
	}
	checkEpilogue(o, fail) // epilogue.go
}

// batchesDisjoint reports whether no two matrices of a batch of layout l
// share an element: they follow one another, or their rows interleave.
func batchesDisjoint(l GemmMatrix, batch int64) bool {
	one := (l.Rows-1)*l.LD + l.Cols
	if l.Stride >= one {
		return true
	}
	reach, ok := mulAdd(batch-1, l.Stride, l.Cols)
	return ok && l.Stride >= l.Cols && l.LD >= reach
}

// mulAdd is a*b + c for non-negative operands, and whether it fits in int64.
func mulAdd(a, b, c int64) (int64, bool) {
	if a < 0 || b < 0 || c < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	sum := int64(lo) + c
	return sum, sum >= 0
}

func batchText(batch, stride int64) string {
	if batch <= 1 {
		return ""
	}
	return fmt.Sprintf(", %d of them %d elements apart,", batch, stride)
}

func spanText(n int64, fits bool) string {
	if !fits {
		return "more than 2^63"
	}
	return fmt.Sprint(n)
}

// Throughputs of the default GEMM cost, in flops per second: the dense
// rates a current data-centre GPU (H100 SXM class) sustains on large
// products, about 70% of its peak.
const (
	gemmHalfFlops = 700e12 // f16, bf16 on tensor cores with f32 accumulation
	gemmTF32Flops = 350e12
	gemmF32Flops  = 45e12 // plain f32 on CUDA cores
	gemmF64Flops  = 45e12 // f64 on tensor cores
	gemmBandwidth = 2.5e12
)

// GemmDuration is the default estimate of a Gemm op's duration, without
// launch latency: the longer of its flops at the dtype's rate and its
// bytes over device bandwidth.
func GemmDuration(op *Op) time.Duration {
	s := op.Gemm
	if s == nil || len(op.Access) == 0 {
		return 0
	}
	rate := gemmF32Flops
	switch op.Access[GemmA].Buf.DType {
	case F16, BF16:
		rate = gemmHalfFlops
	case F64:
		rate = gemmF64Flops
	case F32:
		if s.TF32 {
			rate = gemmTF32Flops
		}
	}
	sec := max(s.Flops()/rate, float64(op.Bytes())/gemmBandwidth)
	return time.Duration(sec * float64(time.Second))
}

// CheckGemmViews checks that a Gemm op, built or not, is whole: a spec
// with sizes in range and defaults filled in, accesses of one dtype that
// GEMMs take, and views that hold every element the spec reaches. Backends
// call it on the ops they are given (a variant made by rebinding views
// included) before handing views to a BLAS.
func CheckGemmViews(op *Op) error {
	s := op.Gemm
	if s == nil {
		return fmt.Errorf("gemm op has no GemmSpec")
	}
	if !s.Epilogue.Valid() {
		return fmt.Errorf("gemm epilogue %d is unknown", uint8(s.Epilogue))
	}
	want := gemmAccesses(s)
	if len(op.Access) != want {
		return fmt.Errorf("gemm has %d accesses, not %d", len(op.Access), want)
	}
	dt := op.Access[GemmA].Buf.DType
	switch dt {
	case F32, F64, F16, BF16:
	default:
		return fmt.Errorf("gemm of %s matrices", dt)
	}
	for _, v := range []int64{s.M, s.N, s.K, s.Batch} {
		if v < 1 || v > maxGemmDim {
			return fmt.Errorf("gemm sizes m=%d n=%d k=%d batch=%d are not all in [1, 2^31)", s.M, s.N, s.K, s.Batch)
		}
	}
	lays := []GemmMatrix{s.LayoutA(), s.LayoutB(), s.LayoutC(), s.LayoutC()}
	es := dt.Size()
	matrices := 3
	if s.SeparateD {
		matrices = 4
	}
	for i, a := range op.Access[:matrices] {
		l := lays[i]
		if a.Buf.DType != dt {
			return fmt.Errorf("gemm access %d is %s, not %s", i, a.Buf.DType, dt)
		}
		if l.LD < l.Cols || l.LD > maxGemmDim || l.Stride < 0 {
			return fmt.Errorf("gemm operand %d has leading dimension %d and stride %d for %d columns", i, l.LD, l.Stride, l.Cols)
		}
		a1, ok1 := mulAdd(s.Batch-1, l.Stride, l.Cols)
		need, ok2 := mulAdd(l.Rows-1, l.LD, a1)
		if !ok1 || !ok2 || a.Offset%es != 0 || a.Size%es != 0 || need > a.Size/es {
			return fmt.Errorf("gemm view %s does not hold its %dx%d %s matrices (ld %d, stride %d, batch %d)",
				a.View, l.Rows, l.Cols, dt, l.LD, l.Stride, s.Batch)
		}
	}
	return checkEpilogueViews(op) // epilogue.go
}
