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
			return nil, flagError(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			if err := checkOutputName(fs); err != nil {
				return nil, err
			}
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// flagError says what the flag package's err says in the words of the
// help: an unknown flag, and the one meant, or a flag without its value.
func flagError(fs *flag.FlagSet, err error) error {
	msg := strings.TrimSpace(err.Error())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		hint := flagSuggestion(fs, err)
		if hint == "" {
			hint = fmt.Sprintf(" (dagrun %s --help lists its flags)", fs.Name())
		}
		return usagef("unknown flag %s%s", dashes(strings.TrimLeft(name, "-")), hint)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return usagef("%s needs a value", dashes(strings.TrimLeft(name, "-")))
	}
	return usagef("%s", helpSpelling(msg))
}

// checkOutputName refuses -o json and the like where the command has
// --format: such a file name is a format asked for in the wrong flag
// (-o ./json still names a file json).
func checkOutputName(fs *flag.FlagSet) error {
	o, format := fs.Lookup("o"), fs.Lookup("format")
	if o == nil || format == nil {
		return nil
	}
	switch v := o.Value.String(); v {
	case "json", "text", "dot", "svg", "html":
		return usagef("-o %s would write a file named %q: -o names the output file, --format chooses the format (--format %s; -o ./%s for a file of that name)", v, v, v, v)
	}
	return nil
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
