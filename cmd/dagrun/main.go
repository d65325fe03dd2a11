// Command dagrun runs, plans, checks and draws dagrun pipeline specs.
//
//	dagrun run spec.yaml        run it and print its outputs' checksums
//	dagrun run spec.yaml --graph --repeat 1000   capture it as a graph once and replay it
//	dagrun plan spec.yaml       print the plan: each stream's instructions and the figures
//	dagrun validate spec.yaml   report every problem with file:line:column
//	dagrun viz spec.yaml -o plan.svg   draw the plan (or a trace: dagrun viz run.json -o run.html)
//
// Exit status: 0 when all went well, 1 when a spec is wrong or a run fails,
// 2 for a usage error. See "dagrun help COMMAND".
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

func main() { os.Exit(runMain()) }

// runMain is main without the exit, shared with the tests' dagrun command.
func runMain() (code int) {
	defer func() {
		// A bug must not greet users with a Go stack trace.
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "dagrun: internal error: %v\n(this is a bug in dagrun; please report it with the spec that caused it)\n", v)
			code = 1
		}
	}()
	return run(os.Args[1:], os.Stdout, os.Stderr)
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // a wrong spec, or a failed run
	exitUsage   = 2 // the command line is wrong
)

// run runs the dagrun command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		return c.help(rest)
	}
	for _, command := range commands {
		if command.name == cmd {
			return c.exec(command, rest)
		}
	}
	fmt.Fprintf(stderr, "dagrun: unknown command %q\nRun 'dagrun help' for usage.\n", cmd)
	return exitUsage
}

type cli struct {
	stdout, stderr io.Writer
	// terminal reports whether w is a terminal, to draw progress on; nil
	// checks for a character device. Tests put a stand-in here.
	terminal func(w io.Writer) bool
	now      func() time.Time // nil: time.Now
}

// command is one dagrun command.
type command struct {
	name  string
	usage string
	run   func(c *cli, args []string) error
}

var commands = []command{
	{"run", runUsage, (*cli).run},
	{"plan", planUsage, (*cli).plan},
	{"validate", validateUsage, (*cli).validate},
	{"viz", vizUsage, (*cli).viz},
}

// exec runs a command and turns its error into an exit status.
func (c *cli) exec(cmd command, args []string) int {
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
		return exitFailure
	default:
		fmt.Fprintf(c.stderr, "dagrun %s: %v\n", cmd.name, err)
		return exitFailure
	}
}

func (c *cli) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stdout, mainUsage)
		return exitOK
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			fmt.Fprint(c.stdout, cmd.usage)
			return exitOK
		}
	}
	fmt.Fprintf(c.stderr, "dagrun help: unknown command %q\nRun 'dagrun help' for usage.\n", args[0])
	return exitUsage
}

const mainUsage = `dagrun runs pipelines of GPU work declared in YAML specs, on stream-ordered
CUDA streams or on the CPU.

Usage:

	dagrun <command> [arguments]

Commands:

	run       run a spec and print its outputs' checksums
	plan      print a spec's plan: each stream's instructions and the figures
	validate  check specs and report every problem with file:line:column
	viz       draw a spec's plan or a run's trace as SVG, HTML or DOT

Run 'dagrun help <command>' or 'dagrun <command> --help' for a command's usage.

Exit status: 0 when all went well, 1 when a spec is wrong or a run fails,
2 for a usage error.
`
