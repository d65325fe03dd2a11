package main

import (
	"flag"
	"io"

	"github.com/dagrun/dagrun/spec"
)

const kernelsUsage = `usage: dagrun kernels [--format text|json] [-o FILE]

Kernels lists the builtin kernels, which a spec launches without
declaring them: each one's parameters, in order, with their types (a
buffer, or a scalar: i32, i64, f32, f64), each buffer's direction (in,
out or inout: how the kernel uses it, which is where the op's
dependencies come from), and a line on what it does. A launch's args
name the parameters:

	- launch: axpy
	  args: {y: d_y, x: d_x, alpha: 0.5}

Flags:
	--format F   text (default) or json
	-o FILE      write to FILE instead of standard output
`

// kernelsDoc is dagrun kernels --format json.
type kernelsDoc struct {
	SchemaVersion int              `json:"schema_version"`
	Kernels       []spec.KernelDoc `json:"kernels"`
}

func (c *cli) kernels(args []string) error {
	asJSON, out, err := c.noArgFlags("kernels", args)
	if err != nil {
		return err
	}
	return c.writeOutput(out, func(w io.Writer) error {
		if asJSON {
			return writeJSON(w, kernelsDoc{SchemaVersion: schemaVersion, Kernels: spec.BuiltinKernels()})
		}
		return spec.WriteKernels(w, "")
	})
}

// noArgFlags parses the flags of a command that takes no arguments, only
// --format text|json and -o: whether JSON was asked for, and -o's path.
func (c *cli) noArgFlags(name string, args []string) (asJSON bool, out string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	format := &oneOf{value: "text", choices: []string{"text", "json"}}
	fs.Var(format, "format", "")
	o := fs.String("o", "", "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return false, "", err
	}
	if len(rest) > 0 {
		return false, "", usagef("%s takes no arguments", name)
	}
	c.jsonErrors = format.value == "json"
	return c.jsonErrors, *o, nil
}
