package dag

import (
	"fmt"
	"strings"
)

// Epilogue is what a GEMM does to each element of its result before it is
// stored, as cuBLASLt's epilogues do: add a bias vector broadcast over the
// rows, apply an activation, or both (bias first). It works on t = alpha
// op(A) op(B) + beta C, in f32 for f32, f16 and bf16 GEMMs, and the
// result d is rounded to the output's dtype once, after the epilogue.
type Epilogue uint8

const (
	NoEpilogue   Epilogue = iota // d = t: the product stored as it is
	EpiBias                      // d[r, c] = t[r, c] + bias[c]
	EpiGelu                      // d = gelu(t), tanh form, as the builtin gelu
	EpiRelu                      // d = max(t, 0), NaN kept, as the builtin relu
	EpiBiasGelu                  // d = gelu(t + bias[c])
	EpiBiasRelu                  // d = relu(t + bias[c])
	numEpilogues                 // keep last
)

var epilogueNames = [numEpilogues]string{"none", "bias", "gelu", "relu", "bias_gelu", "bias_relu"}

// Epilogues lists every epilogue, NoEpilogue first.
func Epilogues() []Epilogue {
	out := make([]Epilogue, numEpilogues)
	for i := range out {
		out[i] = Epilogue(i)
	}
	return out
}

func (e Epilogue) String() string {
	if e < numEpilogues {
		return epilogueNames[e]
	}
	return fmt.Sprintf("Epilogue(%d)", uint8(e))
}

// ParseEpilogue reads an epilogue as String writes it.
func ParseEpilogue(s string) (Epilogue, bool) {
	for i, n := range epilogueNames {
		if n == s {
			return Epilogue(i), true
		}
	}
	return NoEpilogue, false
}

// EpilogueNames lists the names ParseEpilogue takes, for messages.
func EpilogueNames() []string { return epilogueNames[:] }

// Valid reports whether e is an epilogue this package defines.
func (e Epilogue) Valid() bool { return e < numEpilogues }

// HasBias reports whether e adds a bias vector.
func (e Epilogue) HasBias() bool { return e == EpiBias || e == EpiBiasGelu || e == EpiBiasRelu }

// Activation is e's activation alone: EpiGelu, EpiRelu or NoEpilogue.
func (e Epilogue) Activation() Epilogue {
	switch e {
	case EpiGelu, EpiBiasGelu:
		return EpiGelu
	case EpiRelu, EpiBiasRelu:
		return EpiRelu
	}
	return NoEpilogue
}

// ComposeEpilogue is the epilogue that adds a bias (when bias) and then
// applies act (NoEpilogue, EpiGelu or EpiRelu); false for any other act.
func ComposeEpilogue(bias bool, act Epilogue) (Epilogue, bool) {
	switch {
	case act == NoEpilogue && bias:
		return EpiBias, true
	case act == NoEpilogue:
		return NoEpilogue, true
	case act == EpiGelu && bias:
		return EpiBiasGelu, true
	case act == EpiGelu:
		return EpiGelu, true
	case act == EpiRelu && bias:
		return EpiBiasRelu, true
	case act == EpiRelu:
		return EpiRelu, true
	}
	return NoEpilogue, false
}

// epilogueDTypes are the dtypes of GEMMs an epilogue may follow: those of
// the builtins it stands for, and of cuBLASLt's epilogues.
var epilogueDTypes = []DType{F32, F16, BF16}

// WithEpilogue gives the GEMM epilogue e, an option of Gemm ops; one
// that adds a bias needs Bias.
func WithEpilogue(e Epilogue) OpOption {
	return gemmOption("WithEpilogue", func(s *GemmSpec, _ *Op) { s.Epilogue = e })
}

// Bias is the vector the GEMM's epilogue adds to every row of its result:
// N elements of the GEMM's dtype, element c added to column c (as the
// builtin bias_add adds b[c] to y[r, c] of rows as long as b). The GEMM
// reads it: it is the op's last access. An option of Gemm ops; given
// again, it replaces the bias.
func Bias(b View) OpOption { return viewOption{"Bias", setBias, b} }

func setBias(s *GemmSpec, o *Op, b View) {
	n := 3
	if s.SeparateD {
		n++
	}
	if len(o.Access) > n {
		o.Access[n] = In(b)
		return
	}
	o.Access = append(o.Access, In(b))
}

// BiasAccess is the index of the bias among a Gemm op's accesses, after
// A, B, C and (with a separate output) D; -1 when its epilogue adds none.
func (s *GemmSpec) BiasAccess() int {
	if !s.Epilogue.HasBias() {
		return -1
	}
	if s.SeparateD {
		return GemmD + 1
	}
	return GemmD
}

// gemmAccesses is how many accesses a Gemm op of spec s takes.
func gemmAccesses(s *GemmSpec) int {
	n := 3
	if s.SeparateD {
		n++
	}
	if s.Epilogue.HasBias() {
		n++
	}
	return n
}

// orderGemmAccesses puts a Gemm op's accesses in their places whatever
// the order of its options: A, B, C, then D (the written one) and the bias
// (read), which Output and Bias append.
func orderGemmAccesses(acc []Access) {
	if len(acc) == 5 && !acc[3].Mode.Writes() && acc[4].Mode.Writes() {
		acc[3], acc[4] = acc[4], acc[3]
	}
}

// accessesText says which accesses a Gemm op of spec s takes.
func accessesText(s *GemmSpec) string {
	names := []string{"a", "b", "c"}
	if s.SeparateD {
		names = append(names, "d")
	}
	if s.Epilogue.HasBias() {
		names = append(names, "bias")
	}
	return strings.Join(names, ", ")
}

// checkEpilogue checks a Gemm's epilogue and bias, after checkGemm has
// checked the matrices: a bias of N elements of the GEMM's dtype on its
// device, which the GEMM does not write.
func checkEpilogue(o *Op, fail func(field, hint, format string, a ...any)) {
	s := o.Gemm
	e := s.Epilogue
	if e == NoEpilogue {
		return
	}
	dt := o.Access[GemmA].Buf.DType
	ok := false
	for _, d := range epilogueDTypes {
		ok = ok || d == dt
	}
	if !ok {
		fail("epilogue", "epilogues apply to f32, f16 and bf16 GEMMs", "epilogue %s on a gemm of %s matrices", e, dt)
		return
	}
	bi := s.BiasAccess()
	if bi < 0 {
		return
	}
	b := o.Access[bi]
	es := dt.Size()
	switch {
	case b.Buf.DType != dt:
		fail("bias", fmt.Sprintf("give the bias the gemm's dtype, %s", dt), "bias %s is %s but the gemm is %s", b.Buf.Name, b.Buf.DType, dt)
	case b.Buf.Placement != Device || b.Buf.Device != o.Device:
		fail("bias", fmt.Sprintf("copy it to a buffer on device %d first", o.Device),
			"bias %s is %s memory, not memory of device %d", b.Buf.Name, placeName(b.Buf), o.Device)
	case b.Offset%es != 0 || b.Size != s.N*es:
		fail("bias", fmt.Sprintf("give one %s element per column of the output: %d", dt, s.N),
			"bias view %s holds %g %s elements, not n = %d", b.View, float64(b.Size)/float64(es), dt, s.N)
	case b.Overlaps(o.Access[s.OutAccess()].View):
		fail("bias", "keep the bias apart from the output", "bias %s overlaps the output %s", b.View, o.Access[s.OutAccess()].View)
	}
}

// checkEpilogueViews is CheckGemmViews' part for the epilogue.
func checkEpilogueViews(op *Op) error {
	s := op.Gemm
	if !s.Epilogue.Valid() {
		return fmt.Errorf("gemm epilogue %d is unknown", uint8(s.Epilogue))
	}
	if s.Epilogue == NoEpilogue {
		return nil
	}
	dt := op.Access[GemmA].Buf.DType
	if dt != F32 && dt != F16 && dt != BF16 {
		return fmt.Errorf("gemm epilogue %s on %s matrices", s.Epilogue, dt)
	}
	if bi := s.BiasAccess(); bi >= 0 {
		b := op.Access[bi]
		if b.Buf.DType != dt || b.Offset%dt.Size() != 0 || b.Size != s.N*dt.Size() {
			return fmt.Errorf("gemm bias %s is not %d %s elements", b.View, s.N, dt)
		}
	}
	return nil
}
