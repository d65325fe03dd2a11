package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// kernelFunc is a builtin kernel written in Go. mem holds the bytes of the
// launch's accesses; a buffer argument names one of them. Every float
// operation is rounded to f32 on its own (the explicit float32 conversions
// forbid fused multiply-adds), in the order the CUDA twins use, so results
// match them bit for bit. stop is set when the run is abandoned.
type kernelFunc func(stop *atomic.Bool, args []dag.Arg, mem [][]byte) error

// builtin returns the Go function of the builtin kernel op launches,
// after checking that its arguments fit the kernel's parameters.
func builtin(op *dag.Op) (kernelFunc, error) {
	name := op.Launch.Kernel.Name
	def := dag.LookupBuiltin(name)
	if def == nil {
		return nil, fmt.Errorf("%s is not a kernel of the builtin library", name)
	}
	args := op.Launch.Args
	if len(args) != len(def.Params) {
		return nil, fmt.Errorf("%d arguments for the %d parameters of %s", len(args), len(def.Params), name)
	}
	for i, p := range def.Params {
		if p.Kind == dag.BufferParam && (args[i].Access < 0 || args[i].Access >= len(op.Access)) {
			return nil, fmt.Errorf("argument %s names access %d of %d", p.Name, args[i].Access, len(op.Access))
		}
	}
	if def == dag.SetFlag {
		// Its variants differ in x's width, not in rounding: no half twin.
		return setFlag(op.Launch.Kernel.ElemDType()), nil
	}
	if dt := op.Launch.Kernel.ElemDType(); dt != dag.F32 {
		return halfKernel(def, dt)
	}
	f := builtinFuncs[def]
	if f == nil {
		return nil, fmt.Errorf("the cpu backend has no Go version of builtin kernel %s", name)
	}
	if def == dag.Matmul {
		return f, checkMatmul(op)
	}
	return f, nil
}

// builtinFuncs holds the Go version of every kernel of dag.Builtins();
// TestBuiltinTable checks that none is missing.
var builtinFuncs = map[*dag.Kernel]kernelFunc{
	dag.Empty:     empty,
	dag.Spin:      spin,
	dag.Iota:      iotaKernel,
	dag.Scale:     scale,
	dag.Axpy:      axpy,
	dag.Add:       add,
	dag.ReduceSum: reduceSum,
	dag.Matmul:    matmul,
	dag.Gelu:      layerF32(dag.Gelu),
	dag.Relu:      layerF32(dag.Relu),
	dag.BiasAdd:   layerF32(dag.BiasAdd),
	dag.Softmax:   layerF32(dag.Softmax),
	dag.SetFlag:   setFlag(dag.F32),
}

// layerF32 is the f32 version of layer kernel def.
func layerF32(def *dag.Kernel) kernelFunc {
	f, err := layerKernel(def, dag.F32)
	if err != nil {
		return func(*atomic.Bool, []dag.Arg, [][]byte) error { return err }
	}
	return f
}

// checkMatmul makes sure the views hold the matrices, so matmul cannot
// index out of range.
func checkMatmul(op *dag.Op) error {
	a := op.Launch.Args
	m, n, k := a[3].Int, a[4].Int, a[5].Int
	if m <= 0 || n <= 0 || k <= 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 {
		return fmt.Errorf("matmul sizes m=%d, n=%d, k=%d must be positive i32 values", m, n, k)
	}
	for i, need := range []int64{m * n, m * k, k * n} {
		if got := op.Access[a[i].Access].Size / 4; got < need {
			return fmt.Errorf("matmul %dx%dx%d needs %d f32 elements in %s, which holds %d",
				m, n, k, need, dag.Matmul.Params[i].Name, got)
		}
	}
	return nil
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func setF32(b []byte, i int, v float32) { binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v)) }

// elems is the number of whole f32 elements of b.
func elems(b []byte) int { return len(b) / 4 }

func empty(*atomic.Bool, []dag.Arg, [][]byte) error { return nil }

// spin busy-waits, as the CUDA kernel does, so it occupies a worker.
func spin(stop *atomic.Bool, args []dag.Arg, _ [][]byte) error {
	d := time.Duration(args[0].Float * float64(time.Microsecond))
	for start := time.Now(); time.Since(start) < d && !stop.Load(); {
	}
	return nil
}

func iotaKernel(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	x, start := mem[args[0].Access], float32(args[1].Float)
	for i := range elems(x) {
		setF32(x, i, start+float32(i))
	}
	return nil
}

func scale(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	x, alpha := mem[args[0].Access], float32(args[1].Float)
	for i := range elems(x) {
		setF32(x, i, f32(x, i)*alpha)
	}
	return nil
}

func axpy(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	y, x, alpha := mem[args[0].Access], mem[args[1].Access], float32(args[2].Float)
	for i := range min(elems(y), elems(x)) {
		setF32(y, i, f32(y, i)+float32(alpha*f32(x, i)))
	}
	return nil
}

func add(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	c, a, b := mem[args[0].Access], mem[args[1].Access], mem[args[2].Access]
	for i := range min(elems(c), elems(a), elems(b)) {
		setF32(c, i, f32(a, i)+f32(b, i))
	}
	return nil
}

// reduceSum accumulates in f64, in index order.
func reduceSum(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	out, in := mem[args[0].Access], mem[args[1].Access]
	var s float64
	for i := range elems(in) {
		s += float64(f32(in, i))
	}
	if elems(out) > 0 {
		setF32(out, 0, float32(s))
	}
	return nil
}

// matmul accumulates each element of c in f32, in k order.
// It looks at stop before each row, so an abandoned run stops soon.
func matmul(stop *atomic.Bool, args []dag.Arg, mem [][]byte) error {
	c, a, b := mem[args[0].Access], mem[args[1].Access], mem[args[2].Access]
	m, n, k := int(args[3].Int), int(args[4].Int), int(args[5].Int)
	for i := range m {
		if stop.Load() {
			return nil
		}
		for j := range n {
			var acc float32
			for p := range k {
				acc += float32(f32(a, i*k+p) * f32(b, p*n+j))
			}
			setF32(c, i*n+j, acc)
		}
	}
	return nil
}

// setFlag is set_flag over x of dtype dt (f32 or f64): flag[0] = 1 when
// x[0], widened to f64, exceeds threshold, else 0 (NaN too), as the CUDA
// twin compares.
func setFlag(dt dag.DType) kernelFunc {
	return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
		flag, x, threshold := mem[args[0].Access], mem[args[1].Access], args[2].Float
		if len(flag) < 4 || len(x) < int(dt.Size()) {
			return fmt.Errorf("set_flag needs one element in flag and in x, got %d and %d bytes", len(flag), len(x))
		}
		v := float64(f32(x, 0))
		if dt == dag.F64 {
			v = math.Float64frombits(binary.LittleEndian.Uint64(x))
		}
		var set uint32
		if v > threshold {
			set = 1
		}
		binary.LittleEndian.PutUint32(flag, set)
		return nil
	}
}

// floats is a builtin's buffer of f32, f16 or bf16 elements, read and
// written as f32: loads are exact, stores round to nearest even once.
type floats struct {
	b  []byte
	dt dag.DType
}

func (f floats) n() int { return len(f.b) / int(f.dt.Size()) }

func (f floats) at(i int) float32 {
	switch f.dt {
	case dag.F16:
		return dag.F16ToFloat32(binary.LittleEndian.Uint16(f.b[2*i:]))
	case dag.BF16:
		return dag.BF16ToFloat32(binary.LittleEndian.Uint16(f.b[2*i:]))
	}
	return f32(f.b, i)
}

func (f floats) set(i int, v float32) {
	switch f.dt {
	case dag.F16:
		binary.LittleEndian.PutUint16(f.b[2*i:], dag.F16FromFloat32(v))
	case dag.BF16:
		binary.LittleEndian.PutUint16(f.b[2*i:], dag.BF16FromFloat32(v))
	default:
		setF32(f.b, i, v)
	}
}

// halfKernel is the Go function of builtin def over f16 or bf16 buffers:
// the f32 kernel's arithmetic, with each result rounded to the dtype.
func halfKernel(def *dag.Kernel, dt dag.DType) (kernelFunc, error) {
	buf := func(args []dag.Arg, mem [][]byte, i int) floats { return floats{mem[args[i].Access], dt} }
	switch def {
	case dag.Iota:
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			x, start := buf(args, mem, 0), float32(args[1].Float)
			for i := range x.n() {
				x.set(i, start+float32(i))
			}
			return nil
		}, nil
	case dag.Scale:
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			x, alpha := buf(args, mem, 0), float32(args[1].Float)
			for i := range x.n() {
				x.set(i, x.at(i)*alpha)
			}
			return nil
		}, nil
	case dag.Axpy:
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			y, x, alpha := buf(args, mem, 0), buf(args, mem, 1), float32(args[2].Float)
			for i := range min(y.n(), x.n()) {
				y.set(i, y.at(i)+float32(alpha*x.at(i)))
			}
			return nil
		}, nil
	case dag.Add:
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			c, a, b := buf(args, mem, 0), buf(args, mem, 1), buf(args, mem, 2)
			for i := range min(c.n(), a.n(), b.n()) {
				c.set(i, a.at(i)+b.at(i))
			}
			return nil
		}, nil
	case dag.Gelu, dag.Relu, dag.BiasAdd, dag.Softmax:
		return layerKernel(def, dt)
	}
	return nil, fmt.Errorf("builtin kernel %s has no %s version", def.Name, dt)
}

// Constants of the tanh form of GELU, as PyTorch's: sqrt(2/pi) and 0.044715.
const (
	geluBeta  float32 = 0.7978845608028654
	geluKappa float32 = 0.044715
)

// Gelu is the tanh form of GELU, in f32, in the CUDA twin's order:
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Only tanh differs: Go's
// is correctly rounded, CUDA's tanhf within 2 ulp.
func Gelu(x float32) float32 {
	cube := float32(x*x) * x
	inner := geluBeta * float32(x+float32(geluKappa*cube))
	return float32(0.5*x) * float32(1+float32(math.Tanh(float64(inner))))
}

// Relu is max(x, 0), with NaN kept.
func Relu(x float32) float32 {
	if x > 0 || x != x {
		return x
	}
	return 0
}

// layerKernel is the Go function of a layer builtin over buffers of dt.
func layerKernel(def *dag.Kernel, dt dag.DType) (kernelFunc, error) {
	buf := func(args []dag.Arg, mem [][]byte, i int) floats { return floats{mem[args[i].Access], dt} }
	unary := func(f func(float32) float32) kernelFunc {
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			y, x := buf(args, mem, 0), buf(args, mem, 1)
			for i := range min(y.n(), x.n()) {
				y.set(i, f(x.at(i)))
			}
			return nil
		}
	}
	switch def {
	case dag.Gelu:
		return unary(Gelu), nil
	case dag.Relu:
		return unary(Relu), nil
	case dag.BiasAdd:
		return func(_ *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			y, b := buf(args, mem, 0), buf(args, mem, 1)
			nb := b.n()
			if nb == 0 {
				return nil
			}
			for i := range y.n() {
				y.set(i, y.at(i)+b.at(i%nb))
			}
			return nil
		}, nil
	case dag.Softmax:
		return func(stop *atomic.Bool, args []dag.Arg, mem [][]byte) error {
			y, x := buf(args, mem, 0), buf(args, mem, 1)
			cols := int(args[2].Int)
			if cols <= 0 {
				return fmt.Errorf("softmax over rows of %d elements", cols)
			}
			exp := func(v float32) float32 { return float32(math.Exp(float64(v))) }
			for r := 0; r+cols <= min(y.n(), x.n()) && !stop.Load(); r += cols {
				m := float32(math.Inf(-1))
				for j := range cols {
					if v := x.at(r + j); v > m {
						m = v
					}
				}
				var s float32
				for j := range cols {
					s += exp(x.at(r+j) - m)
				}
				for j := range cols {
					y.set(r+j, exp(x.at(r+j)-m)/s)
				}
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("builtin kernel %s is not a layer kernel", def.Name)
}
