package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/trace"
)

// briefReplays is how many replays traced whole the brief summary lists.
const briefReplays = 5

// writeWholeReplays adds the replays traced as whole graphs to the trace
// summary, saying how they were timed: the first few, or with all every
// one.
func writeWholeReplays(w io.Writer, whole []trace.WholeReplay, timing string, all bool) {
	if len(whole) == 0 {
		return
	}
	fmt.Fprintf(w, "replays traced as whole graphs (%s):\n", timing)
	shown := whole
	if !all && len(shown) > briefReplays {
		shown = shown[:briefReplays]
	}
	for _, r := range shown {
		fmt.Fprintf(w, "  replay %d: %s\n", r.Run, human.Duration(r.Dur))
	}
	if n := len(whole) - len(shown); n > 0 {
		fmt.Fprintf(w, "  and %d more (-v lists every one; the trace holds them)\n", n)
	}
}
