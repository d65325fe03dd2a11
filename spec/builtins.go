package spec

import (
	"fmt"
	"io"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// KernelDoc describes a builtin kernel as a spec launches it. It is made
// from dag.Builtins, the one table that dagrun kernels, this package's
// documentation and schema.json all show.
type KernelDoc struct {
	Name   string     `json:"name"`
	Doc    string     `json:"doc"`
	Params []ParamDoc `json:"params"`
	DTypes []string   `json:"dtypes"` // the element types its buffers may hold; none without buffers
}

// ParamDoc is one argument of a builtin kernel.
type ParamDoc struct {
	Name string `json:"name"`
	Type string `json:"type"`                // "buffer", or a scalar type: i32, i64, f32, f64
	Mode string `json:"direction,omitempty"` // buffers: in, out or inout
	// DType is the element type of a buffer whose dtype is fixed (the
	// flag of set_flag, i32); empty when it is one of the kernel's DTypes.
	DType string `json:"dtype,omitempty"`
}

// BuiltinKernels describes every builtin kernel, in dag.Builtins' order.
func BuiltinKernels() []KernelDoc {
	var docs []KernelDoc
	for _, k := range dag.Builtins() {
		d := KernelDoc{Name: k.Name, Doc: k.Doc, Params: []ParamDoc{}, DTypes: []string{}}
		elem := k.ElemDTypes()
		for _, dt := range elem {
			d.DTypes = append(d.DTypes, dt.String())
		}
		for i, p := range k.Params {
			pd := ParamDoc{Name: p.Name, Type: p.Kind.String()}
			if p.Kind == dag.BufferParam {
				pd.Mode = p.Mode.String()
				if dt := k.ParamDType(i); dt != k.ElemDType() || len(elem) == 0 {
					pd.DType = dt.String()
				}
			}
			d.Params = append(d.Params, pd)
		}
		docs = append(docs, d)
	}
	return docs
}

// Signature is the kernel's name and arguments, as in
// "axpy(y: inout buffer, x: in buffer, alpha: f32)".
func (d KernelDoc) Signature() string {
	args := make([]string, len(d.Params))
	for i, p := range d.Params {
		typ := p.Type
		if p.DType != "" {
			typ = p.DType + " " + typ
		}
		args[i] = p.Name + ": " + typ
		if p.Mode != "" {
			args[i] = p.Name + ": " + p.Mode + " " + typ
		}
	}
	return d.Name + "(" + strings.Join(args, ", ") + ")"
}

// Summary is Doc, and the dtypes its buffers may hold when there is a choice.
func (d KernelDoc) Summary() string {
	if len(d.DTypes) < 2 {
		return d.Doc
	}
	return d.Doc + " (buffers: " + strings.Join(d.DTypes, ", ") + ")"
}

// WriteKernels writes the builtin kernels as text, each a line of its
// signature and an indented line of what it does, with indent before
// every line.
func WriteKernels(w io.Writer, indent string) error {
	for _, d := range BuiltinKernels() {
		if _, err := fmt.Fprintf(w, "%s%s\n%s    %s\n", indent, d.Signature(), indent, d.Summary()); err != nil {
			return err
		}
	}
	return nil
}
