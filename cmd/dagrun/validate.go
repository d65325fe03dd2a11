package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/spec"
)

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
		ws := s.WarningProblems()
		doc.Warnings = append(doc.Warnings, ws...)
		doc.Specs = append(doc.Specs, specValidity{File: f, OK: true, Buffers: len(s.Graph.Buffers),
			Ops: len(s.Graph.Ops), Outputs: len(s.Outputs), Warnings: len(ws)})
		if !asJSON {
			c.printWarnings(s)
			fmt.Fprintf(&text, "%s: ok (%s, %s, %s, %s)\n", human.Quote(f),
				human.Count(len(s.Graph.Buffers), "buffer", "buffers"), human.Count(len(s.Graph.Ops), "op", "ops"),
				human.Count(len(s.Outputs), "output", "outputs"), human.Count(len(s.Warnings), "warning", "warnings"))
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
