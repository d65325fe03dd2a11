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
	"github.com/dagrun/dagrun/planner"
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
	if len(inputs) == 0 {
		return usagef("give one spec or trace file (- for standard input)")
	}
	if *out == "" {
		return usagef("-o FILE is required")
	}
	// Several inputs are the traces of a world's ranks, drawn as one.
	ranks, in := len(inputs) > 1, inputs[0]
	var stdinData []byte
	timeline := ranks || strings.EqualFold(filepath.Ext(in), ".json")
	if in == stdio && !ranks {
		if stdinData, err = c.stdinSpec(); err != nil {
			return err
		}
		timeline = isChromeTrace(stdinData)
	}
	ext := format.value
	if ext == "" {
		if *out == stdio && ranks {
			return usagef("-o - needs --format svg or html")
		} else if *out == stdio {
			return usagef("-o - needs --format svg, html or dot")
		}
		ext = strings.TrimPrefix(strings.ToLower(filepath.Ext(*out)), ".")
	}
	switch {
	case ranks && ext != "svg" && ext != "html":
		return usagef("traces draw as .svg or .html, %s", notExt(*out, ext, "svg"))
	case timeline && ext != "svg" && ext != "html":
		return usagef("a trace draws as .svg or .html, %s", notExt(*out, ext, "svg"))
	case !timeline && ext != "svg" && ext != "html" && ext != "dot":
		return usagef("a plan draws as .svg, .html or .dot, %s", notExt(*out, ext, "svg"))
	}
	reads := []fileUse{{Path: in, Role: "the input of viz"}}
	if ranks {
		reads = nil
		for _, in := range inputs {
			reads = append(reads, fileUse{Path: in, Role: "an input of viz"})
		}
	}
	if err := checkFileUses(reads, []fileUse{{Path: *out, Role: "-o"}}); err != nil {
		return err
	}
	var t *trace.Trace
	switch {
	case ranks:
		t, err = readRankTraces(inputs)
	case timeline && in == stdio:
		if t, err = trace.ReadChrome(bytes.NewReader(stdinData)); err != nil {
			err = fmt.Errorf("%s: %w", human.Quote(in), err)
		}
	case timeline:
		t, err = readTrace(in, true)
	default:
		return c.vizPlan(in, *out, ext, files, job.Layout{Streams: int(streams)})
	}
	if err != nil {
		return err
	}
	draw := t.WriteSVG
	if ext == "html" {
		draw = t.WriteHTML
	}
	return c.writeOutputInterruptible(*out, draw)
}

// vizPlan draws the plan of the spec in as ext (svg, html or dot) to out.
func (c *cli) vizPlan(in, out, ext string, files specFiles, l job.Layout) error {
	s, err := c.load(in, files)
	if err != nil {
		return err
	}
	c.printWarnings(s)
	if err := checkFileUses(outputUses(s, out)); err != nil {
		return err
	}
	p, err := makePlan(s, l)
	if err != nil {
		return err
	}
	draw := map[string]func(io.Writer, *planner.Plan) error{"svg": trace.PlanSVG, "html": trace.PlanHTML, "dot": trace.PlanDOT}[ext]
	return c.writeOutputInterruptible(out, func(w io.Writer) error { return draw(w, p) })
}

// readTrace reads the trace file in; with limit, a file larger than viz
// reads is refused at once, before any of it is read.
func readTrace(in string, limit bool) (*trace.Trace, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); limit && err == nil && fi.Mode().IsRegular() && fi.Size() > trace.MaxReadBytes {
		return nil, fmt.Errorf("%s: the trace is %s, more than the %s viz reads (dagrun keeps %d slices of each op of a loop per run: trace fewer runs or fewer ops)",
			in, dag.FormatBytes(fi.Size()), dag.FormatBytes(trace.MaxReadBytes), trace.MaxLoopSlices)
	}
	t, err := trace.ReadChrome(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", human.Quote(in), err)
	}
	return t, nil
}

// readRankTraces reads the traces of several ranks, merged as one.
func readRankTraces(inputs []string) (*trace.Trace, error) {
	var traces []*trace.Trace
	for _, in := range inputs {
		if in == stdio {
			return nil, usagef("several traces are read from files, not standard input")
		}
		t, err := readTrace(in, false)
		if err != nil {
			return nil, err
		}
		if t.Rank == nil {
			return nil, usagef("%s is not the trace of a rank: several traces are merged only when each is one rank's (dagrun run --trace of a world)", in)
		}
		traces = append(traces, t)
	}
	return trace.MergeRanks(traces)
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
