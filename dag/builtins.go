package dag

import "fmt"

// The builtin kernel library. Every backend implements each of these with the
// same meaning, so a graph gives the same results on any backend (integer and
// copy results bit for bit, float results within rounding). Buffers hold f32
// elements, or, for the kernels marked so, f16 or bf16 elements when the
// buffers passed are of those dtypes (all of one dtype; the arithmetic is in
// f32 and each result is rounded to the dtype once, to nearest even).
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
)

// Builtins lists the builtin kernel library.
func Builtins() []*Kernel {
	return []*Kernel{Empty, Spin, Iota, Scale, Axpy, Add, ReduceSum, Matmul, Gelu, Relu, BiasAdd, Softmax}
}

// LookupBuiltin returns the builtin kernel called name, or nil.
func LookupBuiltin(name string) *Kernel {
	for _, k := range Builtins() {
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
	k := builtin(name, doc, check, params...)
	k.variants = map[DType]*Kernel{}
	for _, dt := range []DType{F16, BF16} {
		k.variants[dt] = &Kernel{Name: name, Doc: doc, Params: params, Source: Builtin, Entry: name + "_" + dt.String(),
			check: check, dtype: dt, base: k}
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
func (k *Kernel) HalfTypes() bool { return k.Base().variants != nil }

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
// buffers: a half-precision one when they are f16 or bf16 (all alike),
// else the f32 kernel, which reads any other buffer's bytes as f32.
func builtinVariant(o *Op, fail func(field, hint, format string, a ...any)) bool {
	l := o.Launch
	base := l.Kernel.Base()
	half := DType(0)
	for i, p := range base.Params {
		if p.Kind != BufferParam {
			continue
		}
		dt := o.Access[l.Args[i].Access].Buf.DType
		if dt != F16 && dt != BF16 {
			continue
		}
		if base.variants == nil {
			fail("args."+p.Name, "use f32 buffers", "%s works on f32 elements, not %s", base.Name, dt)
			return false
		}
		if half == 0 {
			half = dt
		}
	}
	if half == 0 {
		l.Kernel = base
		return true
	}
	for i, p := range base.Params {
		if p.Kind != BufferParam {
			continue
		}
		if dt := o.Access[l.Args[i].Access].Buf.DType; dt != half {
			fail("args."+p.Name, fmt.Sprintf("give every buffer of %s one dtype", base.Name), "%s is %s but another argument is %s", p.Name, dt, half)
			return false
		}
	}
	l.Kernel = base.Variant(half)
	return true
}
