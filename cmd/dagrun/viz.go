package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dagrun/dagrun/trace"
)

const vizUsage = `usage: dagrun viz spec.yaml -o plan.svg|plan.html|plan.dot [--streams N]
       dagrun viz run.json -o timeline.svg|timeline.html

Viz draws a spec's plan without running it (streams as lanes under the
planner's cost model, waits as arrows; or a Graphviz DOT graph), or the
measured timeline of a run from the trace file that 'dagrun run --trace'
wrote. The output's extension picks the format.

Flags:
	-o FILE      the picture to write (required)
	--streams N  compute streams per device and priority, for a spec's plan
`

func (c *cli) viz(args []string) error {
	fs := flag.NewFlagSet("viz", flag.ContinueOnError)
	out := fs.String("o", "", "")
	var streams streamsFlag
	fs.Var(&streams, "streams", "")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("give one spec or trace file")
	}
	if *out == "" {
		return usagef("-o FILE is required")
	}
	ext := strings.ToLower(filepath.Ext(*out))
	timeline := strings.EqualFold(filepath.Ext(files[0]), ".json")
	switch {
	case timeline && ext != ".svg" && ext != ".html":
		return usagef("a trace draws as .svg or .html, not %q", ext)
	case !timeline && ext != ".svg" && ext != ".html" && ext != ".dot":
		return usagef("a plan draws as .svg, .html or .dot, not %q", ext)
	}

	var draw func(w io.Writer) error
	if timeline {
		in, err := os.Open(files[0])
		if err != nil {
			return err
		}
		t, err := trace.ReadChrome(in)
		in.Close()
		if err != nil {
			return err
		}
		draw = t.WriteSVG
		if ext == ".html" {
			draw = t.WriteHTML
		}
	} else {
		s, err := c.load(files[0])
		if err != nil {
			return err
		}
		p, err := makePlan(s, int(streams))
		if err != nil {
			return err
		}
		switch ext {
		case ".svg":
			draw = func(w io.Writer) error { return trace.PlanSVG(w, p) }
		case ".html":
			draw = func(w io.Writer) error { return trace.PlanHTML(w, p) }
		default:
			draw = func(w io.Writer) error { return trace.PlanDOT(w, p) }
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := draw(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
