package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/dagrun/dagrun/cuda"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"dagrun": func() { os.Exit(runMain()) },
	})
}

// TestScripts runs the command end to end over testdata/script/*.txtar.
// Each script's work directory holds a copy of the repository's examples
// in examples/. The condition [cuda] holds where the CUDA backend opens;
// under DAGRUN_REQUIRE_GPU=1 (the GPU machine's scripts set it) a backend
// that does not open fails the script instead of taking the [!cuda] lines.
// [cgo] holds where this binary was built with cgo.
// cmpout FILE1 FILE2 compares two outputs of dagrun run but for their
// summary lines, which hold timings; status N PROG ARGS... runs PROG and
// checks that it exits with status N.
func TestScripts(t *testing.T) {
	var ports portPool
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			if err := ports.set(env); err != nil {
				return err
			}
			return copyExamples(filepath.Join(env.WorkDir, "examples"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpout": cmpout,
			"status": status,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "cgo":
				return builtWithCgo(), nil
			case "cuda":
				return cudaCondition()
			}
			return false, nil
		},
	})
}

// builtWithCgo reports whether this test binary was built with cgo (and
// so with the CUDA backend, which may still find no driver).
func builtWithCgo() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" {
			return s.Value == "1"
		}
	}
	return false
}

// cudaCondition is the [cuda] condition: whether the CUDA backend opens,
// or an error where DAGRUN_REQUIRE_GPU=1 demands that it does.
func cudaCondition() (bool, error) {
	b, err := cuda.New()
	if err != nil {
		if os.Getenv("DAGRUN_REQUIRE_GPU") == "1" {
			return false, fmt.Errorf("DAGRUN_REQUIRE_GPU=1, but the cuda backend does not open: %w", err)
		}
		return false, nil
	}
	return true, b.Close()
}

func copyExamples(dst string) error {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cmpout compares the lines of two files of dagrun run output, leaving out
// the summary lines ("ran ..." and "graph: ..."): an eager run and a graph
// run of one spec print the same outputs but not the same timings.
func cmpout(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: cmpout FILE1 FILE2")
	}
	if neg {
		ts.Fatalf("unsupported: ! cmpout")
	}
	var got [2]string
	for i, name := range args {
		var keep []string
		for line := range strings.Lines(ts.ReadFile(name)) {
			if !strings.HasPrefix(line, "ran ") && !strings.HasPrefix(line, "graph: ") {
				keep = append(keep, line)
			}
		}
		got[i] = strings.Join(keep, "")
	}
	if got[0] != got[1] {
		ts.Fatalf("%s and %s differ but for their summaries:\n%s\n---\n%s", args[0], args[1], got[0], got[1])
	}
}

// status runs a program, like exec, and checks its exit status.
func status(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: status N PROG [ARGS...]")
	}
	if neg {
		ts.Fatalf("unsupported: ! status")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// portPool hands out TCP ports for the rendezvous of ranks run as
// processes (DAGRUN_PORT=$PORT0), each at most once: the scripts of a
// testscript.Run run in parallel, and two that drew the same port met in
// one rendezvous (a rank of one world refused by the other's rank 0).
type portPool struct {
	mu    sync.Mutex
	given map[int]bool
}

// set sets PORT0 to PORT7 in a script's environment to ports that are free
// now and that p has not given before. They are drawn below Linux's
// ephemeral range (32768 and up), where no connection of another test
// takes its local port: fixed ports there made the scripts fail now and
// then beside other packages' tests.
func (p *portPool) set(env *testscript.Env) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.given == nil {
		p.given = map[int]bool{}
	}
	for i := range 8 {
		port, err := freePort(p.given)
		if err != nil {
			return err
		}
		p.given[port] = true
		env.Setenv(fmt.Sprintf("PORT%d", i), strconv.Itoa(port))
	}
	return nil
}

// freePort is a port in [20000, 32768) not in given that can be listened
// on.
func freePort(given map[int]bool) (int, error) {
	for range 200 {
		port := 20000 + rand.IntN(12768)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, errors.New("no free TCP port found in [20000, 32768)")
}
