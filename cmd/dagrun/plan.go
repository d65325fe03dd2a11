package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strconv"

	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

const planUsage = `usage: dagrun plan spec.yaml [--format text|json|dot] [--streams N] [--compare]

Plan prints how dagrun would run a spec, without running it: each stream's
instructions in order (launch, copy, fill, alloc, free, record and wait on
events) and the plan's figures (ops, streams per device and priority,
cross-stream edges, waits inserted, estimated makespan against the
critical-path bound).

Flags:
	--format F   text (default), json, or dot (Graphviz: ops as nodes, one
	             cluster per stream, waits as edges)
	--streams N  compute streams per device and priority, 1 to 32
	             (default: the spec's run.streams, else 4)
	--compare    print each placement strategy's estimated makespan (for
	             an eager run and a graph replay) and wait count instead of
	             the plan
`

// streamsFlag is --streams: 0 (not given) or 1..32.
type streamsFlag int

func (s *streamsFlag) String() string { return "" }

func (s *streamsFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 32 {
		return errors.New("use 1 to 32")
	}
	*s = streamsFlag(n)
	return nil
}

// makePlan plans s with its run settings, streams overriding them when
// not 0.
func makePlan(s *spec.Spec, streams int) (*planner.Plan, error) {
	opts := planner.Options{Streams: s.Run.Streams, SharedCopyStreams: s.Run.SharedCopyStreams}
	if streams != 0 {
		opts.Streams = streams
	}
	return planner.New(s.Graph, opts)
}

func (c *cli) plan(args []string) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	format := &oneOf{value: "text", choices: []string{"text", "json", "dot"}}
	fs.Var(format, "format", "")
	var streams streamsFlag
	fs.Var(&streams, "streams", "")
	compare := fs.Bool("compare", false, "")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("give one spec file")
	}
	s, err := c.load(files[0])
	if err != nil {
		return err
	}
	if *compare {
		return writeComparison(c.stdout, s, int(streams))
	}
	p, err := makePlan(s, int(streams))
	if err != nil {
		return err
	}
	switch format.value {
	case "json":
		data, err := p.MarshalJSON()
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err = out.WriteTo(c.stdout)
		return err
	case "dot":
		return trace.PlanDOT(c.stdout, p)
	}
	return p.WriteText(c.stdout)
}
