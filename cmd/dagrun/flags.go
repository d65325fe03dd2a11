package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/dagrun/dagrun/spec"
)

// usageError is a wrong command line; dagrun exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// helpRequest asks for the command's usage.
type helpRequest struct{}

func (helpRequest) Error() string { return "help requested" }

// parseFlags parses args with fs, allowing flags after the positional
// arguments ("dagrun run spec.yaml --backend cpu"), and returns the
// positional arguments. A lone "-" is a positional argument (standard
// input), and "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{}
			}
			return nil, usagef("%s", helpSpelling(strings.TrimSpace(err.Error()))+flagSuggestion(fs, err))
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// flagSuggestion is " (did you mean --repeat?)" for a flag the command
// does not have but nearly has, else "".
func flagSuggestion(fs *flag.FlagSet, err error) string {
	got, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	got = strings.TrimLeft(got, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	best, ok := spec.Nearest(got, names)
	if !ok {
		return ""
	}
	return " (did you mean " + dashes(best) + "?)"
}

// dashes spells a flag as the help does: --streams, but -o.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagName finds the flag names in the flag package's errors, which it
// spells with one dash.
var flagName = regexp.MustCompile(`(flag|defined:|argument:) -([A-Za-z0-9][A-Za-z0-9-]+)`)

// helpSpelling spells the long flags in a flag package error as the help
// does: --streams, not -streams. One-letter flags (-o) keep one dash.
func helpSpelling(msg string) string {
	return flagName.ReplaceAllString(msg, "$1 --$2")
}

// oneOf is a flag.Value that takes one of a fixed set of strings, or an
// alias of one.
type oneOf struct {
	value   string
	choices []string
	aliases map[string]string // another name -> the choice it means
}

func (o *oneOf) String() string { return o.value }

func (o *oneOf) Set(s string) error {
	if to, ok := o.aliases[s]; ok {
		s = to
	}
	for _, c := range o.choices {
		if s == c {
			o.value = s
			return nil
		}
	}
	return fmt.Errorf("use one of %s", strings.Join(o.choices, ", "))
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(s string) error {
	if s == "" {
		return errors.New("give a directory")
	}
	*m = append(*m, s)
	return nil
}

// setFlags names the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
