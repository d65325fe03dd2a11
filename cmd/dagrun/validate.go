package main

import (
	"flag"
	"fmt"
	"github.com/dagrun/dagrun/spec"
	"io"
	"slices"
	"strings"
)

const validateUsage = `usage: dagrun validate spec.yaml... [--format text|json] [-o FILE]

Validate checks specs without running them and reports every problem, each
as file:line:column: what is wrong (what would be right). Warnings (such as
copies between pageable host memory and a device, which CUDA runs
synchronously) are reported too but do not fail validation. It prints
"FILE: ok" with the spec's size for each valid spec, and exits with status 1
when any spec has errors. A spec named - is read from standard input.

Flags:
	--format F       text (default), or json: one document with
	                 schema_version, each spec's result, and every error
	                 and warning as {file, line, column, op, message, hint}
	-o FILE          write the results to FILE instead of standard output
	                 (text problems still go to standard error)
	--set NAME=VALUE give the spec's parameter NAME this value (more than once for several)
	--allow-path DIR let the specs read and write files under DIR too
	                 (repeatable)
	--save-dir DIR   check save paths as dagrun run --save-dir DIR would
`

// validateDoc is what validate --format json writes.
type validateDoc struct {
	SchemaVersion int            `json:"schema_version"`
	Specs         []specValidity `json:"specs"`
	Errors        []problem      `json:"errors"`
	Warnings      []problem      `json:"warnings"`
}

type specValidity struct {
	File     string `json:"file"`
	OK       bool   `json:"ok"`
	Buffers  int    `json:"buffers,omitempty"`
	Ops      int    `json:"ops,omitempty"`
	Outputs  int    `json:"outputs,omitempty"`
	Warnings int    `json:"warnings,omitempty"`
}

func (c *cli) validate(args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	format := &oneOf{value: "text", choices: []string{"text", "json"}}
	fs.Var(format, "format", "")
	out := fs.String("o", "", "")
	var files specFiles
	files.addFlags(fs)
	specs, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	// validate answers for every value of the parameters, not only the
	// ones given.
	files.extra = append(files.extra, spec.CheckParamRange())
	if len(specs) == 0 {
		return usagef("give at least one spec file (- for standard input)")
	}
	if len(slices.DeleteFunc(slices.Clone(specs), func(s string) bool { return s != stdio })) > 1 {
		return usagef("standard input (-) can hold one spec only")
	}
	asJSON := format.value == "json"
	c.jsonErrors = asJSON
	doc := validateDoc{SchemaVersion: schemaVersion, Errors: []problem{}, Warnings: []problem{}}
	var text strings.Builder
	for _, in := range specs {
		s, err := c.load(in, files)
		f := in
		if in == stdio {
			f = stdinName
		}
		if err != nil {
			fl := asFailure(err)
			doc.Errors = append(doc.Errors, fl.errors...)
			doc.Warnings = append(doc.Warnings, fl.warnings...)
			doc.Specs = append(doc.Specs, specValidity{File: f})
			if !asJSON {
				c.writeFailureText("validate", fl)
			}
			continue
		}
		ws := specWarnings(s)
		doc.Warnings = append(doc.Warnings, ws...)
		doc.Specs = append(doc.Specs, specValidity{File: f, OK: true, Buffers: len(s.Graph.Buffers),
			Ops: len(s.Graph.Ops), Outputs: len(s.Outputs), Warnings: len(ws)})
		if !asJSON {
			c.printWarnings(s)
			nb, no, nout, nw := len(s.Graph.Buffers), len(s.Graph.Ops), len(s.Outputs), len(s.Warnings)
			fmt.Fprintf(&text, "%s: ok (%d %s, %d %s, %d %s, %d %s)\n", f,
				nb, plural(nb, "buffer", "buffers"), no, plural(no, "op", "ops"),
				nout, plural(nout, "output", "outputs"), nw, plural(nw, "warning", "warnings"))
		}
	}
	err = c.writeOutput(*out, func(w io.Writer) error {
		if asJSON {
			return writeJSON(w, doc)
		}
		_, err := io.WriteString(w, text.String())
		return err
	})
	if err != nil {
		return err
	}
	for _, sv := range doc.Specs {
		if !sv.OK {
			return reported{exitFailure}
		}
	}
	return nil
}
