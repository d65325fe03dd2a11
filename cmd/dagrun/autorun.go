package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/dagrun/dagrun/executor"
)

// noteAutoCapture puts what --graph auto did into the report: which runs
// were replays. A plan it could not capture says why on stderr with -v.
func noteAutoCapture(stderr io.Writer, l executor.RunLog, verbose bool, r *runReport) {
	if l.CapturedAfter > 0 {
		r.Runs, r.CapturedAfter = l.String(), l.CapturedAfter
		return
	}
	if l.NotCaptured != nil && verbose {
		why := strings.ReplaceAll(l.NotCaptured.Error(), "\n", "; ")
		fmt.Fprintf(stderr, "dagrun run: --graph auto: the runs stay eager, the plan cannot be captured: %s\n", why)
	}
}
