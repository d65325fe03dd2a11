// Command dagrun runs, plans, checks and draws dagrun pipeline specs.
//
//	dagrun run spec.yaml        run it and print its outputs' checksums
//	dagrun run spec.yaml --graph --repeat 1000   capture it as a graph once and replay it
//	dagrun plan spec.yaml       print the plan: each stream's instructions and the figures
//	dagrun validate spec.yaml   report every problem with file:line:column
//	dagrun viz spec.yaml -o plan.svg   draw the plan (or a trace: dagrun viz run.json -o run.html)
//	dagrun kernels              list the builtin kernels and their parameters
//	dagrun version              print dagrun's version (also: dagrun --version)
//
// A spec named "-" is read from standard input, and "-o -" writes to
// standard output. Every JSON document dagrun writes has a schema_version.
//
// Exit statuses:
//
//	0    all went well
//	1    a spec is wrong, or a run failed
//	2    the command line is wrong
//	3    an internal error: a bug in dagrun, such as a plan that fails verification
//	130  interrupted (SIGINT or SIGTERM): the run was stopped and everything freed
//
// See "dagrun help COMMAND".
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dagrun/dagrun/spec"
)

func main() { os.Exit(runMain()) }

// runMain is main without the exit, shared with the tests' dagrun command.
func runMain() (code int) {
	defer func() {
		// A bug must not greet users with a Go stack trace.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "dagrun: internal error: %v\n%s\n", v, bugNote)
			code = exitInternal
		}
	}()
	return run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Exit statuses: one table, which the usage text and README repeat.
const (
	exitOK          = 0
	exitFailure     = 1   // a wrong spec, or a failed run
	exitUsage       = 2   // the command line is wrong
	exitInternal    = 3   // a bug in dagrun: a plan that fails verification, a recovered panic
	exitInterrupted = 130 // SIGINT or SIGTERM stopped the command (128 + SIGINT, as shells report it)
)

// bugNote follows every internal error.
const bugNote = "(this is a bug in dagrun; please report it with the spec that caused it)"

// run runs the dagrun command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	interrupted, release := interrupts(stderr, os.Exit)
	defer release()
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, interrupted: interrupted}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage("dagrun"))
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		return c.help(rest)
	case "--version", "-version":
		cmd = "version"
	}
	for _, command := range commandList() {
		if command.name == cmd {
			return c.exec(command, rest)
		}
	}
	fmt.Fprintf(stderr, "dagrun: unknown command %q%s\nRun 'dagrun help' for usage.\n", cmd, commandSuggestion(cmd))
	return exitUsage
}

// commandSuggestion is " (did you mean "run"?)" for a command name
// nearly right, else "".
func commandSuggestion(got string) string {
	names := commandNames()
	if best, ok := spec.Nearest(got, names[:len(names)-1]); ok {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

type cli struct {
	stdin          io.Reader
	stdinData      []byte // stdin, once read (stdinSpec); nil before
	stdout, stderr io.Writer
	// terminal reports whether w is a terminal, to draw progress on; nil
	// checks for a character device. Tests put a stand-in here.
	terminal func(w io.Writer) bool
	now      func() time.Time // nil: time.Now
	// jsonErrors is set by a command given --format json: its failures
	// are then written to stdout as one JSON document (see failureDoc).
	jsonErrors bool
	// interrupted is canceled by the first SIGINT or SIGTERM (see
	// interrupts); nil in tests that make a cli of their own.
	interrupted context.Context
}

// interruptContext is the context of a command's work: canceled by the
// first SIGINT or SIGTERM.
func (c *cli) interruptContext() context.Context {
	if c.interrupted == nil {
		return context.Background()
	}
	return c.interrupted
}

// command is one dagrun command.
type command struct {
	name  string
	usage string
	run   func(c *cli, args []string) error
}

// commandList is dagrun's commands, in the order help lists them. A
// function, not a variable: completion lists the commands too.
func commandList() []command {
	return []command{
		{"run", usage("run"), (*cli).run},
		{"plan", usage("plan"), (*cli).plan},
		{"validate", usage("validate"), (*cli).validate},
		{"viz", usage("viz"), (*cli).viz},
		{"kernels", usage("kernels"), (*cli).kernels},
		{"completion", usage("completion"), (*cli).completion},
		{"version", usage("version"), (*cli).version},
	}
}

func (c *cli) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stdout, usage("dagrun"))
		return exitOK
	}
	for _, cmd := range commandList() {
		if cmd.name == args[0] {
			fmt.Fprint(c.stdout, cmd.usage)
			return exitOK
		}
	}
	fmt.Fprintf(c.stderr, "dagrun help: unknown command %q%s\nRun 'dagrun help' for usage.\n", args[0], commandSuggestion(args[0]))
	return exitUsage
}
