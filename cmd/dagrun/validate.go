package main

import (
	"errors"
	"flag"
	"fmt"
)

const validateUsage = `usage: dagrun validate spec.yaml...

Validate checks specs without running them and reports every problem, each
as file:line:column: what is wrong (what would be right). Warnings (such as
copies between pageable host memory and a device, which CUDA runs
synchronously) are reported too but do not fail validation. It prints
"FILE: ok" with the spec's size for each valid spec, and exits with status 1
when any spec has errors.
`

func (c *cli) validate(args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("give at least one spec file")
	}
	failed := false
	for _, f := range files {
		s, err := c.load(f)
		switch {
		case errors.As(err, new(reported)):
			failed = true
		case err != nil:
			fmt.Fprintf(c.stderr, "dagrun validate: %v\n", err)
			failed = true
		default:
			fmt.Fprintf(c.stdout, "%s: ok (%d buffers, %d ops, %d outputs, %d warnings)\n",
				f, len(s.Graph.Buffers), len(s.Graph.Ops), len(s.Outputs), len(s.Warnings))
		}
	}
	if failed {
		return reported{}
	}
	return nil
}
