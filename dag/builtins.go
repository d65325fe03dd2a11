package dag

import "fmt"

// The builtin kernel library. Every backend implements each of these with the
// same meaning, so a graph gives the same results on any backend (integer and
// copy results bit for bit, float results within rounding). Buffers hold f32
// elements, or, for the kernels marked so, f16 or bf16 elements when the
// buffers passed are of those dtypes (all of one dtype; the arithmetic is in
// f32 and each result is rounded to the dtype once, to nearest even). A
// buffer of any other dtype is refused by Build (see Kernel.ElemDTypes).
// Build gives such a launch the dtype's variant of the kernel (see
// Kernel.ElemDType; its entry is the name with "_f16" or "_bf16").
// Backends pass each buffer parameter of a builtin as a pointer followed by
// its element count (int64), then the scalars as declared; the element loops
// stride over the grid, so results never depend on the launch shape.
var (
	// Empty does nothing: it measures launch cost.
	Empty = builtin("empty", "does nothing: it measures launch cost", nil)
	// Spin busy-waits for us microseconds on one block.
	Spin = builtin("spin", "busy-waits for us microseconds on one block", nil, Param{Name: "us", Kind: F64Param})
	// Iota sets x[i] = start + i.
	Iota = halfBuiltin("iota", "sets x[i] = start + i", nil, bufParam("x", Write), Param{Name: "start", Kind: F32Param})
	// Scale sets x[i] *= alpha.
	Scale = halfBuiltin("scale", "sets x[i] *= alpha", nil, bufParam("x", ReadWrite), Param{Name: "alpha", Kind: F32Param})
	// Axpy sets y[i] += alpha * x[i].
	Axpy = halfBuiltin("axpy", "sets y[i] += alpha * x[i]", sameCounts, bufParam("y", ReadWrite), bufParam("x", Read), Param{Name: "alpha", Kind: F32Param})
	// Add sets c[i] = a[i] + b[i].
	Add = halfBuiltin("add", "sets c[i] = a[i] + b[i]", sameCounts, bufParam("c", Write), bufParam("a", Read), bufParam("b", Read))
	// Gelu sets y[i] = gelu(x[i]) in the tanh form, as PyTorch's
	// gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
	Gelu = halfBuiltin("gelu", "sets y[i] = gelu(x[i]), tanh form (PyTorch's approximate=\"tanh\")", sameCounts, bufParam("y", Write), bufParam("x", Read))
	// Relu sets y[i] = max(x[i], 0) (NaN stays NaN).
	Relu = halfBuiltin("relu", "sets y[i] = max(x[i], 0); NaN stays NaN", sameCounts, bufParam("y", Write), bufParam("x", Read))
	// BiasAdd adds b to every row of y: y[r, c] += b[c], where a row of y is
	// as long as b.
	BiasAdd = halfBuiltin("bias_add", "adds b to every row of y: y[r, c] += b[c], a row as long as b", checkBiasAdd, bufParam("y", ReadWrite), bufParam("b", Read))
	// Softmax sets each row of y (cols elements) to the softmax of the
	// same row of x: exp(x - max) / sum(exp(x - max)), in f32.
	Softmax = halfBuiltin("softmax", "sets each row of y (cols elements) to the softmax of that row of x, in f32", checkSoftmax, bufParam("y", Write), bufParam("x", Read), Param{Name: "cols", Kind: I32Param})
	// ReduceSum sets out[0] to the sum of in, accumulated in f64.
	ReduceSum = noAlias(builtin("reduce_sum", "sets out[0] to the sum of in, accumulated in f64", checkReduce, bufParam("out", Write), bufParam("in", Read)))
	// Matmul sets c (m x n) = a (m x k) times b (k x n), row-major, accumulated in f32.
	Matmul = noAlias(builtin("matmul", "sets c (m x n) = a (m x k) times b (k x n), row-major, accumulated in f32", checkMatmul, bufParam("c", Write), bufParam("a", Read), bufParam("b", Read),
		Param{Name: "m", Kind: I32Param}, Param{Name: "n", Kind: I32Param}, Param{Name: "k", Kind: I32Param}))
	// SetFlag sets flag[0] = x[0] > threshold ? 1 : 0: the flag a While or
	// If reads, set from data. flag is i32; x is f32 or f64 (its entry is
	// set_flag_f64 then); the comparison is in f64, exact for both, and a
	// NaN compares false, clearing the flag. One thread does the work; the
	// views hold whole elements, so each holds at least one.
	SetFlag = typedBuiltin("set_flag", "sets flag[0] = x[0] > threshold ? 1 : 0, compared in f64; NaN clears it",
		nil, []DType{F64}, map[int]DType{0: I32},
		bufParam("flag", Write), bufParam("x", Read), Param{Name: "threshold", Kind: F64Param})
)

// Builtins lists the builtin kernel library.
func Builtins() []*Kernel {
	b := builtins()
	return b[:]
}

// builtins is the library as an array, which LookupBuiltin reads without
// allocating.
func builtins() [13]*Kernel {
	return [...]*Kernel{Empty, Spin, Iota, Scale, Axpy, Add, ReduceSum, Matmul, Gelu, Relu, BiasAdd, Softmax, SetFlag}
}

// LookupBuiltin returns the builtin kernel called name, or nil.
func LookupBuiltin(name string) *Kernel {
	for _, k := range builtins() {
		if k.Name == name {
			return k
		}
	}
	return nil
}

func builtin(name, doc string, check func(*Op) error, params ...Param) *Kernel {
	return &Kernel{Name: name, Doc: doc, Params: params, Source: Builtin, check: check}
}

func noAlias(k *Kernel) *Kernel { k.noAlias = true; return k }

// halfBuiltin declares a builtin that also works on f16 and bf16 buffers,
// with a variant kernel for each.
func halfBuiltin(name, doc string, check func(*Op) error, params ...Param) *Kernel {
	return typedBuiltin(name, doc, check, []DType{F16, BF16}, nil, params...)
}

// typedBuiltin declares a builtin with a variant for each of dtypes
// beside f32, its entry the name with "_" and the dtype. fixed holds the
// buffer parameters whose elements are of one dtype whatever the
// variant (by parameter index), which take no part in choosing it.
func typedBuiltin(name, doc string, check func(*Op) error, dtypes []DType, fixed map[int]DType, params ...Param) *Kernel {
	k := builtin(name, doc, check, params...)
	k.fixed = fixed
	k.variants = map[DType]*Kernel{}
	for _, dt := range dtypes {
		k.variants[dt] = &Kernel{Name: name, Doc: doc, Params: params, Source: Builtin, Entry: name + "_" + dt.String(),
			check: check, dtype: dt, base: k, fixed: fixed}
	}
	return k
}

// ElemDType is the element type a builtin kernel works on: f32, or f16 or
// bf16 for the variants Build picks for half-precision buffers.
func (k *Kernel) ElemDType() DType {
	if k.base == nil {
		return F32
	}
	return k.dtype
}

// HalfTypes reports whether builtin k has f16 and bf16 variants.
func (k *Kernel) HalfTypes() bool { return k.Base().variants[F16] != nil }

// ElemDTypes lists the element types builtin k works on: f32, then those
// of its variants in dag's order; nil for a kernel without buffers.
func (k *Kernel) ElemDTypes() []DType {
	b := k.Base()
	var out []DType
	for i, p := range b.Params {
		if _, fixed := b.fixed[i]; p.Kind == BufferParam && !fixed {
			out = []DType{F32}
			break
		}
	}
	if out == nil {
		return nil
	}
	for _, dt := range DTypes() {
		if b.variants[dt] != nil {
			out = append(out, dt)
		}
	}
	return out
}

// ParamDType is the element type of k's i-th parameter, a buffer: the
// one it is fixed to (set_flag's flag is i32), else k's ElemDType. A
// backend passes the buffer's element count in these elements.
func (k *Kernel) ParamDType(i int) DType {
	if dt, ok := k.fixed[i]; ok {
		return dt
	}
	return k.ElemDType()
}

// Base is the kernel a dtype variant was made from (k itself otherwise).
func (k *Kernel) Base() *Kernel {
	if k.base != nil {
		return k.base
	}
	return k
}

// Variant is k's variant for elements of dt: k's base for f32, nil when k
// has none for dt.
func (k *Kernel) Variant(dt DType) *Kernel {
	b := k.Base()
	if dt == F32 {
		return b
	}
	return b.variants[dt]
}

// elemSize is the element size of a builtin launch's buffers.
func elemSize(op *Op) int64 { return op.Launch.Kernel.ElemDType().Size() }

func bufParam(name string, m Mode) Param { return Param{Name: name, Kind: BufferParam, Mode: m} }

// bufferArg is the view passed for the i-th parameter of op's kernel.
func bufferArg(op *Op, i int) View { return op.Access[op.Launch.Args[i].Access].View }

func sameCounts(op *Op) error {
	k := op.Launch.Kernel
	first := bufferArg(op, 0)
	for i, p := range k.Params {
		if p.Kind != BufferParam {
			continue
		}
		if v := bufferArg(op, i); v.Size != first.Size {
			es := elemSize(op)
			return fmt.Errorf("%s has %d elements but %s has %d; %s needs views of equal size",
				k.Params[0].Name, first.Size/es, p.Name, v.Size/es, k.Name)
		}
	}
	return nil
}

func checkReduce(op *Op) error {
	if bufferArg(op, 0).Size < 4 {
		return fmt.Errorf("out must hold at least one f32 element")
	}
	return nil
}

func checkMatmul(op *Op) error {
	a := op.Launch.Args
	m, n, k := a[3].Int, a[4].Int, a[5].Int
	if m <= 0 || n <= 0 || k <= 0 {
		return fmt.Errorf("m, n and k must be positive, got %d, %d, %d", m, n, k)
	}
	for _, c := range []struct {
		param string
		elems int64
	}{{"c", m * n}, {"a", m * k}, {"b", k * n}} {
		i := map[string]int{"c": 0, "a": 1, "b": 2}[c.param]
		if got := bufferArg(op, i).Size / 4; got < c.elems {
			return fmt.Errorf("%s holds %d f32 elements, matmul %dx%dx%d needs %d", c.param, got, m, n, k, c.elems)
		}
	}
	return nil
}

func checkBiasAdd(op *Op) error {
	es := elemSize(op)
	ny, nb := bufferArg(op, 0).Size/es, bufferArg(op, 1).Size/es
	if ny%nb != 0 {
		return fmt.Errorf("y holds %d elements, not a whole number of rows of b's %d", ny, nb)
	}
	return nil
}

func checkSoftmax(op *Op) error {
	es := elemSize(op)
	ny, nx := bufferArg(op, 0).Size/es, bufferArg(op, 1).Size/es
	cols := op.Launch.Args[2].Int
	switch {
	case ny != nx:
		return fmt.Errorf("y has %d elements but x has %d; softmax needs views of equal size", ny, nx)
	case cols < 1:
		return fmt.Errorf("cols = %d: a row has at least one element", cols)
	case nx%cols != 0:
		return fmt.Errorf("x holds %d elements, not a whole number of rows of %d", nx, cols)
	}
	return nil
}

// builtinVariant picks the variant of builtin launch o for the dtype of its
// buffers: the f32 kernel, or the variant of their dtype (all alike: f16,
// bf16, or f64 for set_flag). A dtype the kernel has no variant for is
// refused: a kernel reading another dtype's bytes as f32 computes garbage.
// Parameters of a fixed dtype must have it. The dtypes accepted are those
// of the kernel's variants, which every backend implements.
func builtinVariant(o *Op, fail func(field, hint, format string, a ...any)) bool {
	l := o.Launch
	base := l.Kernel.Base()
	var elem DType
	chosen := false
	for i, p := range base.Params {
		if p.Kind != BufferParam {
			continue
		}
		b := o.Access[l.Args[i].Access].Buf
		dt := b.DType
		if want, ok := base.fixed[i]; ok {
			if dt != want {
				fail("args."+p.Name, fmt.Sprintf("declare %s as %s", b.Name, want), "%s is %s, but %s takes %s elements", p.Name, dt, base.Name, want)
				return false
			}
			continue
		}
		if base.variants[dt] != nil {
			if !chosen {
				elem, chosen = dt, true
			}
			continue
		}
		if dt != F32 {
			names := dtypeList(base.ElemDTypes())
			fail("args."+p.Name, "use "+names+" buffers", "%s works on %s elements, not %s", base.Name, names, dt)
			return false
		}
	}
	if !chosen {
		l.Kernel = base
		return true
	}
	for i, p := range base.Params {
		if _, fixed := base.fixed[i]; p.Kind != BufferParam || fixed {
			continue
		}
		if dt := o.Access[l.Args[i].Access].Buf.DType; dt != elem {
			fail("args."+p.Name, fmt.Sprintf("give every buffer of %s one dtype", base.Name), "%s is %s but another argument is %s", p.Name, dt, elem)
			return false
		}
	}
	l.Kernel = base.Variant(elem)
	return true
}

// dtypeList names dtypes for messages: "f32", "f32 or f64", "f32, f16 or bf16".
func dtypeList(dts []DType) string {
	s := ""
	for i, dt := range dts {
		switch {
		case i == 0:
		case i == len(dts)-1:
			s += " or "
		default:
			s += ", "
		}
		s += dt.String()
	}
	return s
}
