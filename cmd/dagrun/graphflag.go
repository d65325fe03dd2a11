package main

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/executor"
)

// graphFlag is --graph: when dagrun run captures the runs as a graph
// (never, auto or always: executor.GraphMode), or a boolean as it was
// before modes (plain --graph and --graph=true are always, --graph=false
// never).
type graphFlag struct{ mode executor.GraphMode }

func (g *graphFlag) String() string { return g.mode.String() }

// IsBoolFlag lets plain --graph mean always.
func (g *graphFlag) IsBoolFlag() bool { return true }

func (g *graphFlag) Set(s string) error {
	switch s {
	case "true", "1", "t", "T", "TRUE", "True":
		s = "always"
	case "false", "0", "f", "F", "FALSE", "False":
		s = "never"
	}
	m, ok := executor.ParseGraphMode(s)
	if !ok {
		return fmt.Errorf("use never, auto or always (plain --graph is always, --graph=false never)")
	}
	g.mode = m
	return nil
}

// joinGraphMode rewrites "--graph MODE" as "--graph=MODE": the flag
// package reads a boolean flag's next argument as a positional one.
func joinGraphMode(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--graph" || a == "-graph") && i+1 < len(args) && slices.Contains([]string{"never", "auto", "always"}, args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}
