package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"syscall"

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

// writeOutputInterruptible is writeOutput for a command with no signal
// handling of its own (viz): SIGINT or SIGTERM while it writes stops the
// writing, removes the temporary file and ends with status 130, leaving the
// old file or none.
func (c *cli) writeOutputInterruptible(path string, write func(io.Writer) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.writeOutput(path, func(w io.Writer) error {
		if err := write(ctxWriter{ctx, w}); err != nil {
			return err
		}
		return ctx.Err() // a signal after the last write: do not rename
	})
	if ctx.Err() != nil {
		return &failure{status: exitInterrupted, errors: []problem{{File: path, Message: "interrupted: nothing was written"}}}
	}
	return err
}

// ctxWriter fails every write once ctx ends, so that a long drawing stops.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (w ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // names such as <stdin> stay readable
	return enc.Encode(v)
}
