package main

import (
	"encoding/json"
	"io"

	"github.com/dagrun/dagrun/internal/atomicfile"
	"github.com/dagrun/dagrun/job"
)

// schemaVersion is the version of every JSON document dagrun writes.
const schemaVersion = job.SchemaVersion

// stdio is the name of standard input or output on the command line.
const stdio = "-"

// writeOutput writes what write produces to path: standard output for ""
// or "-", else a file written beside its final name and renamed over it
// when complete, so that a failure leaves the old file or none, never a
// torn one.
func (c *cli) writeOutput(path string, write func(io.Writer) error) error {
	if path == "" || path == stdio {
		return write(c.stdout)
	}
	return atomicfile.Write(path, write)
}

// writeOutputInterruptible is writeOutput for a long drawing (viz): SIGINT
// or SIGTERM while it writes stops the writing, removes the temporary file
// and ends with status 130, leaving the old file or none.
func (c *cli) writeOutputInterruptible(path string, write func(io.Writer) error) error {
	ctx := c.interruptContext()
	err := c.writeOutput(path, atomicfile.Until(ctx, write))
	if ctx.Err() != nil {
		return &failure{status: exitInterrupted, errors: []problem{{File: path, Message: "interrupted: nothing was written"}}}
	}
	return err
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // names such as <stdin> stay readable
	return enc.Encode(v)
}
