package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/trace"
)

func (c *cli) viz(args []string) error {
	fs := flag.NewFlagSet("viz", flag.ContinueOnError)
	out := fs.String("o", "", "")
	format := &oneOf{choices: []string{"svg", "html", "dot"}}
	fs.Var(format, "format", "")
	var streams streamsFlag
	fs.Var(&streams, "streams", "")
	var files specFiles
	files.addFlags(fs)
	inputs, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(inputs) > 1 {
		return c.vizRanks(inputs, *out, format.value) // ranks.go
	}
	if len(inputs) != 1 {
		return usagef("give one spec or trace file (- for standard input)")
	}
	if *out == "" {
		return usagef("-o FILE is required")
	}
	in := inputs[0]
	var stdinData []byte
	timeline := strings.EqualFold(filepath.Ext(in), ".json")
	if in == stdio {
		data, err := io.ReadAll(io.LimitReader(c.stdin, maxStdinSpec+1))
		if err != nil {
			return err
		}
		stdinData, timeline = data, isChromeTrace(data)
		c.stdin = bytes.NewReader(data) // for a spec, load reads it again
	}
	ext := format.value
	if ext == "" {
		if *out == stdio {
			return usagef("-o - needs --format svg, html or dot")
		}
		ext = strings.TrimPrefix(strings.ToLower(filepath.Ext(*out)), ".")
	}
	switch {
	case timeline && ext != "svg" && ext != "html":
		return usagef("a trace draws as .svg or .html, %s", notExt(*out, ext, "svg"))
	case !timeline && ext != "svg" && ext != "html" && ext != "dot":
		return usagef("a plan draws as .svg, .html or .dot, %s", notExt(*out, ext, "svg"))
	}

	if err := checkFileUses([]fileUse{{in, "the input of viz"}}, []fileUse{{*out, "-o"}}); err != nil {
		return err
	}
	var draw func(w io.Writer) error
	if timeline {
		var r io.Reader = bytes.NewReader(stdinData)
		if in != stdio {
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > trace.MaxReadBytes {
				return fmt.Errorf("%s: the trace is %s, more than the %s viz reads (dagrun keeps %d slices of each op of a loop per run: trace fewer runs or fewer ops)",
					in, dag.FormatBytes(fi.Size()), dag.FormatBytes(trace.MaxReadBytes), trace.MaxLoopSlices)
			}
			r = f
		}
		t, err := trace.ReadChrome(r)
		if err != nil {
			return fmt.Errorf("%s: %w", human.Quote(in), err)
		}
		draw = t.WriteSVG
		if ext == "html" {
			draw = t.WriteHTML
		}
	} else {
		s, err := c.load(in, files)
		if err != nil {
			return err
		}
		c.printWarnings(s)
		if err := checkFileUses(specUses(s, nil, []fileUse{{*out, "-o"}})); err != nil {
			return err
		}
		p, err := makePlan(s, job.Layout{Streams: int(streams)})
		if err != nil {
			return err
		}
		switch ext {
		case "svg":
			draw = func(w io.Writer) error { return trace.PlanSVG(w, p) }
		case "html":
			draw = func(w io.Writer) error { return trace.PlanHTML(w, p) }
		default:
			draw = func(w io.Writer) error { return trace.PlanDOT(w, p) }
		}
	}
	return c.writeOutputInterruptible(*out, draw)
}

// isChromeTrace reports whether data is a JSON object with traceEvents
// (JSON is YAML too, so the content tells a trace from a spec).
func isChromeTrace(data []byte) bool {
	var probe struct {
		TraceEvents json.RawMessage `json:"traceEvents"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.TraceEvents != nil
}

// notExt says what is wrong with the output name out whose extension (or
// --format) ext is not one viz draws, suggesting out.want when it has
// none.
func notExt(out, ext, want string) string {
	if ext == "" {
		return fmt.Sprintf("and -o %s has no extension: name the file %s.%s, or add --format", out, out, want)
	}
	return fmt.Sprintf("not %q", "."+ext)
}
