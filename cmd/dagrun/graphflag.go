package main

import (
	"fmt"
	"slices"
)

// When dagrun run captures the runs as a graph (--graph never|auto|always).
const (
	graphNever  = "never"  // every run eager
	graphAuto   = "auto"   // eager, captured after a few identical runs where the plan allows
	graphAlways = "always" // captured once, every run a replay
)

var graphModes = []string{graphNever, graphAuto, graphAlways}

// graphFlag is --graph: a mode, or a boolean as it was before modes
// (plain --graph and --graph=true are always, --graph=false never).
type graphFlag struct{ mode string }

func (g *graphFlag) String() string { return g.mode }

// IsBoolFlag lets plain --graph mean always.
func (g *graphFlag) IsBoolFlag() bool { return true }

func (g *graphFlag) Set(s string) error {
	switch s {
	case "true", "1", "t", "T", "TRUE", "True":
		s = graphAlways
	case "false", "0", "f", "F", "FALSE", "False":
		s = graphNever
	}
	if !slices.Contains(graphModes, s) {
		return fmt.Errorf("use never, auto or always (plain --graph is always, --graph=false never)")
	}
	g.mode = s
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
		if (a == "--graph" || a == "-graph") && i+1 < len(args) && slices.Contains(graphModes, args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// graphModeOf is the mode the run uses: --graph's, else run.graph's
// (true always, false never), else auto.
func graphModeOf(flagMode string, set, specGraph, specSet bool) string {
	switch {
	case set:
		return flagMode
	case specSet && specGraph:
		return graphAlways
	case specSet:
		return graphNever
	}
	return graphAuto
}
