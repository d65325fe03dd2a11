package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

// problem is one thing wrong: in a spec at file:line:column, with an op,
// or with the command as a whole (no file). Text and JSON show the same
// fields; an op is always named by its name in the spec's graph.
type problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Op      string `json:"op,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// at places p at pos.
func (p problem) at(pos spec.Position) problem {
	p.File, p.Line, p.Column = pos.File, pos.Line, pos.Col
	return p
}

// text is p as one line: "file:line:col: op "NAME" message (hint)", with
// prefix instead of the place when p has none.
func (p problem) text(prefix string) string {
	var b strings.Builder
	switch {
	case p.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", human.Quote(p.File), p.Line, p.Column)
	case p.File != "":
		fmt.Fprintf(&b, "%s: ", human.Quote(p.File))
	default:
		b.WriteString(prefix)
	}
	if p.Op != "" {
		fmt.Fprintf(&b, "op %q ", p.Op)
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		fmt.Fprintf(&b, " (%s)", p.Hint)
	}
	return b.String()
}

func specProblem(e *spec.Error) problem {
	return problem{Message: e.Msg, Hint: e.Hint}.at(e.Pos)
}

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
		msgs = append(msgs, p.text(""))
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
			f := &failure{status: exitInternal, errors: []problem{{Message: fmt.Sprint(v)}}}
			if c.jsonErrors {
				c.writeFailureJSON(cmd.name, f)
			} else {
				c.writeFailureText(cmd.name, f)
			}
			status = exitInternal
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
	f := asFailure(err)
	if c.jsonErrors {
		c.writeFailureJSON(cmd.name, f)
	} else {
		c.writeFailureText(cmd.name, f)
	}
	return f.status
}

func (c *cli) writeFailureJSON(cmd string, f *failure) {
	doc := failureDoc{SchemaVersion: schemaVersion, Command: cmd, Status: f.status,
		Errors: f.errors, Warnings: f.warnings, NotWritten: f.notWritten}
	if doc.Errors == nil {
		doc.Errors = []problem{}
	}
	if err := writeJSON(c.stdout, doc); err != nil {
		fmt.Fprintf(c.stderr, "dagrun %s: %v\n", cmd, err)
	}
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
		lines = append(lines, line{w, w.text(prefix)})
	}
	for _, e := range f.errors {
		lines = append(lines, line{e, e.text(prefix)})
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
		f.errors = append(f.errors, specProblem(e))
	}
	if s != nil {
		f.warnings = specWarnings(s)
	}
	return f
}

func specWarnings(s *spec.Spec) []problem {
	var ws []problem
	for _, w := range s.Warnings {
		ws = append(ws, specProblem(w))
	}
	return ws
}

// opFailure is an error of a run, placed at the op's declaration in the
// spec when it names an op.
func opFailure(s *spec.Spec, err error) *failure {
	if me, ok := errors.AsType[*executor.MemoryError](err); ok { // faults.go
		return memoryFailure(s, me)
	}
	if oe, ok := errors.AsType[*dag.OpError](err); ok {
		p := problem{File: s.File, Op: oe.Op, Message: "failed: " + oe.Err.Error()}
		if pos, ok := s.OpPos(oe.Op); ok {
			p = p.at(pos)
		} else if gemm, _, fused := strings.Cut(oe.Op, "+"); fused {
			// A fused op ("fc1+bias1+gelu") is placed at its gemm.
			if pos, ok := s.OpPos(gemm); ok {
				p = p.at(pos)
			}
		}
		return &failure{status: exitFailure, errors: []problem{p}}
	}
	return failed(exitFailure, err)
}

// verifyFailure is a plan that verify.Verify refused: an internal error,
// placed at the first op it names.
func verifyFailure(s *spec.Spec, err error) *failure {
	p := problem{Message: "the plan failed verification: " + err.Error()}
	if ve, ok := errors.AsType[*verify.Error](err); ok && len(ve.Ops) > 0 {
		p.Op = ve.Ops[0]
		if pos, ok := s.OpPos(p.Op); ok {
			p = p.at(pos)
		}
	}
	return &failure{status: exitInternal, errors: []problem{p}}
}

// captureFailure is why the plan of s cannot be captured as a graph, each
// problem placed at its op's declaration, and how to run eagerly instead:
// flag tells whether --graph asked for the graph, else the spec.
func captureFailure(s *spec.Spec, err error, flag bool) *failure {
	eager := "drop --graph to run eagerly"
	if !flag {
		eager = "set run.graph: false or pass --graph=false to run eagerly"
	}
	errs := dag.Errors(err)
	if len(errs) == 0 {
		return failed(exitFailure, fmt.Errorf("cannot capture the run as a graph: %w (%s)", err, eager))
	}
	f := &failure{status: exitFailure}
	for _, e := range errs {
		p := problem{File: s.File, Op: e.Op, Message: "cannot be captured in a graph: " + e.Msg, Hint: e.Hint}
		if pos, ok := s.OpPos(e.Op); ok && e.Op != "" {
			p = p.at(pos)
		}
		f.errors = append(f.errors, p)
	}
	f.errors = append(f.errors, problem{File: s.File, Message: "the run cannot be captured as a graph; fix the ops above, or " + eager})
	return f
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
