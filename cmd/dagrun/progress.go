package main

import (
	"io"
	"os"

	"github.com/dagrun/dagrun/internal/progress"
)

// newProgress returns the bar of total runs, drawn on stderr only when it
// is a terminal and quiet is false.
func (c *cli) newProgress(total int, quiet bool) *progress.Bar {
	var w io.Writer
	if !quiet && c.isTerminal(c.stderr) {
		w = c.stderr
	}
	return progress.New(w, total, c.now)
}

// isTerminal reports whether w is a terminal, as c's terminal check says
// (a test's stand-in) or else by whether it is a character device.
func (c *cli) isTerminal(w io.Writer) bool {
	if c.terminal != nil {
		return c.terminal(w)
	}
	return isCharDevice(w)
}

func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
