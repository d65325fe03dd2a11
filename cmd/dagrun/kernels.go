package main

import (
	"flag"
	"io"

	"github.com/dagrun/dagrun/spec"
)

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
