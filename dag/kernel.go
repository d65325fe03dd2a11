package dag

import "fmt"

// SourceKind says where a kernel's code comes from.
type SourceKind uint8

const (
	Builtin SourceKind = iota // dagrun's kernel library, implemented by every backend
	CUDAC                     // CUDA C source, compiled at run time with NVRTC
	PTX                       // a PTX file
	Cubin                     // a cubin or fatbin file
)

var sourceKindNames = [...]string{Builtin: "builtin", CUDAC: "cuda", PTX: "ptx", Cubin: "cubin"}

func (k SourceKind) String() string {
	if int(k) < len(sourceKindNames) {
		return sourceKindNames[k]
	}
	return fmt.Sprintf("SourceKind(%d)", uint8(k))
}

// ParamKind is the type of a kernel parameter.
type ParamKind uint8

const (
	BufferParam ParamKind = iota // a device pointer; the argument says the view and its mode
	I32Param                     // a 32-bit integer
	I64Param                     // a 64-bit integer
	F32Param                     // a 32-bit float
	F64Param                     // a 64-bit float
)

var paramKindNames = [...]string{BufferParam: "buffer", I32Param: "i32", I64Param: "i64", F32Param: "f32", F64Param: "f64"}

func (k ParamKind) String() string {
	if int(k) < len(paramKindNames) {
		return paramKindNames[k]
	}
	return fmt.Sprintf("ParamKind(%d)", uint8(k))
}

// ParseParamKind returns the ParamKind named s.
func ParseParamKind(s string) (ParamKind, bool) {
	for i, n := range paramKindNames {
		if n == s {
			return ParamKind(i), true
		}
	}
	return 0, false
}

// Param is one kernel parameter. A buffer parameter of a builtin kernel
// also fixes the mode its argument must allow.
type Param struct {
	Name string
	Kind ParamKind
	Mode Mode // buffer parameters: how the kernel uses the memory
}

// Kernel is a function that Launch operations run on a device.
type Kernel struct {
	Name   string
	Doc    string // a builtin's one line on what it does (dagrun kernels, spec/doc.go, the schema)
	Params []Param
	Source SourceKind
	Path   string // PTX or cubin file
	Code   string // CUDA C source
	Entry  string // symbol in the module; defaults to Name

	check func(op *Op) error // builtin-specific argument checks
	// noAlias: the kernel does not work in place, so even identical views
	// of a written parameter and another one race (reductions, matmul).
	noAlias bool

	// Builtins with f16 and bf16 variants: the base kernel lists them; a
	// variant names its dtype and base.
	variants map[DType]*Kernel
	dtype    DType
	base     *Kernel
	// fixed: the buffer parameters (by index) whose dtype does not follow
	// the variant's (set_flag's i32 flag).
	fixed map[int]DType
}

// EntryName is the symbol the kernel is looked up by in its module.
func (k *Kernel) EntryName() string {
	if k.Entry != "" {
		return k.Entry
	}
	return k.Name
}

func (k *Kernel) String() string { return k.Name }
