package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/spec"
)

// problem is one thing wrong, placed where it can be.
type problem = spec.Problem

// failure is why a command failed: its problems and its exit status. The
// command's exec writes it as text on stderr, or as a failureDoc on stdout
// after --format json.
type failure struct {
	status   int
	errors   []problem
	warnings []problem
	// notWritten lists the outputs with a save path that a failed run did
	// not write: "BUFFER to PATH".
	notWritten []string
}

func (f *failure) Error() string {
	var msgs []string
	for _, p := range f.errors {
		msgs = append(msgs, p.Text(""))
	}
	return strings.Join(msgs, "\n")
}

// failureDoc is a failure as JSON.
type failureDoc struct {
	SchemaVersion int       `json:"schema_version"`
	Command       string    `json:"command"`
	Status        int       `json:"status"`
	Errors        []problem `json:"errors"`
	Warnings      []problem `json:"warnings,omitempty"`
	NotWritten    []string  `json:"not_written,omitempty"`
}

// failed makes err a failure: one problem with err's message.
func failed(status int, err error) *failure {
	return &failure{status: status, errors: []problem{{Message: err.Error()}}}
}

// asFailure is the failure err is or wraps, else err as a failure of status 1.
func asFailure(err error) *failure {
	if f, ok := errors.AsType[*failure](err); ok {
		return f
	}
	return failed(exitFailure, err)
}

// exec runs a command and turns its error into an exit status. A panic
// is an internal error: a bug must not greet users with a Go stack trace.
func (c *cli) exec(cmd command, args []string) (status int) {
	defer func() {
		if v := recover(); v != nil {
			status = c.writeFailure(cmd.name, &failure{status: exitInternal, errors: []problem{{Message: fmt.Sprint(v)}}})
		}
	}()
	err := cmd.run(c, args)
	switch e := err.(type) {
	case nil:
		return exitOK
	case helpRequest:
		fmt.Fprint(c.stdout, cmd.usage)
		return exitOK
	case *usageError:
		fmt.Fprintf(c.stderr, "dagrun %s: %s\nRun 'dagrun %s --help' for usage.\n", cmd.name, e.msg, cmd.name)
		return exitUsage
	case reported:
		return e.status
	}
	return c.writeFailure(cmd.name, asFailure(err))
}

// writeFailure writes f as a failureDoc on stdout after --format json,
// else as text (writeFailureText), and returns its status.
func (c *cli) writeFailure(cmd string, f *failure) int {
	if !c.jsonErrors {
		c.writeFailureText(cmd, f)
		return f.status
	}
	doc := failureDoc{SchemaVersion: schemaVersion, Command: cmd, Status: f.status,
		Errors: f.errors, Warnings: f.warnings, NotWritten: f.notWritten}
	if doc.Errors == nil {
		doc.Errors = []problem{}
	}
	if err := writeJSON(c.stdout, doc); err != nil {
		fmt.Fprintf(c.stderr, "dagrun %s: %v\n", cmd, err)
	}
	return f.status
}

// writeFailureText writes the warnings and errors together in file order,
// then what a failed run did not write.
func (c *cli) writeFailureText(cmd string, f *failure) {
	prefix := "dagrun " + cmd + ": "
	if f.status == exitInternal {
		prefix += "internal error: "
	}
	type line struct {
		p    problem
		text string
	}
	var lines []line
	for _, w := range f.warnings {
		w.Message = "warning: " + w.Message
		lines = append(lines, line{w, w.Text(prefix)})
	}
	for _, e := range f.errors {
		lines = append(lines, line{e, e.Text(prefix)})
	}
	// Problems without a line (the command's own) come last.
	slices.SortStableFunc(lines, func(a, b line) int {
		return cmp.Or(cmp.Compare(b2i(a.p.Line == 0), b2i(b.p.Line == 0)), cmp.Compare(a.p.Line, b.p.Line), cmp.Compare(a.p.Column, b.p.Column))
	})
	for _, l := range lines {
		fmt.Fprintln(c.stderr, l.text)
	}
	if len(f.notWritten) > 0 {
		fmt.Fprintf(c.stderr, "%soutputs not written: %s\n", "dagrun "+cmd+": ", strings.Join(f.notWritten, ", "))
	}
	if f.status == exitInternal {
		fmt.Fprintln(c.stderr, bugNote)
	}
}

// specFailure is the failure of a spec that did not load: every error and
// warning, placed.
func specFailure(s *spec.Spec, errs []*spec.Error) *failure {
	f := &failure{status: exitFailure}
	for _, e := range errs {
		f.errors = append(f.errors, e.Problem())
	}
	if s != nil {
		f.warnings = s.WarningProblems()
	}
	return f
}

// verifyFailure is a plan that verify.Verify refused: an internal error,
// placed at the first op it names.
func verifyFailure(s *spec.Spec, err error) *failure {
	return &failure{status: exitInternal, errors: []problem{job.Problem(s, err)}}
}

// captureFailure is why the plan of s cannot be captured as a graph, each
// problem placed at its op's declaration, and how to run eagerly instead:
// flag tells whether --graph asked for the graph, else the spec.
func captureFailure(s *spec.Spec, err error, flag bool) *failure {
	eager := "drop --graph to run eagerly"
	if !flag {
		eager = "set run.graph: false or pass --graph=false to run eagerly"
	}
	ps := job.CaptureProblems(s, err)
	if len(ps) == 0 {
		return failed(exitFailure, fmt.Errorf("cannot capture the run as a graph: %w (%s)", err, eager))
	}
	ps = append(ps, problem{File: s.File, Message: "the run cannot be captured as a graph; fix the ops above, or " + eager})
	return &failure{status: exitFailure, errors: ps}
}

// reported is a failure whose details the command wrote already, with
// the exit status to return.
type reported struct{ status int }

func (r reported) Error() string { return fmt.Sprintf("failed with exit status %d", r.status) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
