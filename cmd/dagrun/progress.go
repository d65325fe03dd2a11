package main

import (
	"io"

	"github.com/dagrun/dagrun/executor/progress"
)

// newProgress returns the progress of total runs, shown on stderr unless
// quiet is true: a bar on a terminal, lines elsewhere.
func (c *cli) newProgress(total int, quiet bool) *progress.Bar {
	var opts []progress.Option
	if c.now != nil {
		opts = append(opts, progress.Clock(c.now))
	}
	if !c.isTerminal(c.stderr) {
		opts = append(opts, progress.Lines("dagrun run: progress: "))
	}
	var w io.Writer
	if !quiet {
		w = c.stderr
	}
	return progress.New(w, total, opts...)
}

// isTerminal reports whether w is a terminal, as c's terminal check says
// (a test's stand-in) or else progress.IsTerminal.
func (c *cli) isTerminal(w io.Writer) bool {
	if c.terminal != nil {
		return c.terminal(w)
	}
	return progress.IsTerminal(w)
}
