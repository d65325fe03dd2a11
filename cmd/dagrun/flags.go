package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// usageError is a wrong command line; dagrun exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// helpRequest asks for the command's usage.
type helpRequest struct{}

func (helpRequest) Error() string { return "help requested" }

// reported is a failure whose details are printed already.
type reported struct{}

func (reported) Error() string { return "failed" }

// parseFlags parses args with fs, allowing flags after the positional
// arguments ("dagrun run spec.yaml --backend cpu"), and returns the
// positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{}
			}
			return nil, usagef("%s", strings.TrimSpace(err.Error()))
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// oneOf is a flag.Value that takes one of a fixed set of strings.
type oneOf struct {
	value   string
	choices []string
}

func (o *oneOf) String() string { return o.value }

func (o *oneOf) Set(s string) error {
	for _, c := range o.choices {
		if s == c {
			o.value = s
			return nil
		}
	}
	return fmt.Errorf("use one of %s", strings.Join(o.choices, ", "))
}

// setFlags names the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
