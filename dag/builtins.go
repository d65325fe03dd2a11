package dag

import "fmt"

// The builtin kernel library. Every backend implements each of these with the
// same meaning, so a graph gives the same results on any backend (integer and
// copy results bit for bit, float results within rounding). Buffers hold f32
// elements. Backends pass each buffer parameter of a builtin as a pointer
// followed by its element count (int64), then the scalars as declared; the
// element loops stride over the grid, so results never depend on the launch
// shape.
var (
	// Empty does nothing: it measures launch cost.
	Empty = builtin("empty", nil)
	// Spin busy-waits for us microseconds on one block.
	Spin = builtin("spin", nil, Param{Name: "us", Kind: F64Param})
	// Iota sets x[i] = start + i.
	Iota = builtin("iota", nil, bufParam("x", Write), Param{Name: "start", Kind: F32Param})
	// Scale sets x[i] *= alpha.
	Scale = builtin("scale", nil, bufParam("x", ReadWrite), Param{Name: "alpha", Kind: F32Param})
	// Axpy sets y[i] += alpha * x[i].
	Axpy = builtin("axpy", sameCounts, bufParam("y", ReadWrite), bufParam("x", Read), Param{Name: "alpha", Kind: F32Param})
	// Add sets c[i] = a[i] + b[i].
	Add = builtin("add", sameCounts, bufParam("c", Write), bufParam("a", Read), bufParam("b", Read))
	// ReduceSum sets out[0] to the sum of in, accumulated in f64.
	ReduceSum = noAlias(builtin("reduce_sum", checkReduce, bufParam("out", Write), bufParam("in", Read)))
	// Matmul sets c (m x n) = a (m x k) times b (k x n), row-major, accumulated in f32.
	Matmul = noAlias(builtin("matmul", checkMatmul, bufParam("c", Write), bufParam("a", Read), bufParam("b", Read),
		Param{Name: "m", Kind: I32Param}, Param{Name: "n", Kind: I32Param}, Param{Name: "k", Kind: I32Param}))
)

// Builtins lists the builtin kernel library.
func Builtins() []*Kernel {
	return []*Kernel{Empty, Spin, Iota, Scale, Axpy, Add, ReduceSum, Matmul}
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

func builtin(name string, check func(*Op) error, params ...Param) *Kernel {
	return &Kernel{Name: name, Params: params, Source: Builtin, check: check}
}

func noAlias(k *Kernel) *Kernel { k.noAlias = true; return k }

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
			return fmt.Errorf("%s has %d elements but %s has %d; %s needs views of equal size",
				k.Params[0].Name, first.Size/4, p.Name, v.Size/4, k.Name)
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
