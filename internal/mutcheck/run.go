package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// runner runs go test for the mutants.
type runner struct {
	root, tmp, table string
	timeout          time.Duration
}

// outcome is what became of one mutant.
type outcome uint8

const (
	caught   outcome = iota // a test failed
	survived                // every test passed
	broken                  // it did not build, or go test could not run
)

// result is one mutant's outcome: the tests that failed when caught, go
// test's output otherwise.
type result struct {
	m       Mutant
	outcome outcome
	by      []string
	output  string
	took    time.Duration
}

// goTest runs go test -short -count=1 (with the overlay when not "") and
// returns its combined output and whether it passed; err is a failure to
// run it at all.
func (r *runner) goTest(ctx context.Context, overlay, run string, pkgs []string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout+30*time.Second)
	defer cancel()
	args := []string{"test", "-short", "-count=1", "-failfast", "-timeout", r.timeout.String()}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, goCommand(), args...)
	cmd.Dir = r.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return out.String(), false, err
	}
	if ctx.Err() != nil {
		return out.String(), false, fmt.Errorf("go test ran past %s", r.timeout+30*time.Second)
	}
	return out.String(), err == nil, nil
}

func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// baseline runs, unmutated, the tests the mutants run, grouped by their
// packages: they must pass, or a mutant would look caught for nothing.
func (r *runner) baseline(ctx context.Context, mutants []Mutant, jobs int) error {
	type group struct {
		pkgs []string
		runs []string
		all  bool
	}
	var order []string
	groups := map[string]*group{}
	for _, m := range mutants {
		key := strings.Join(m.Pkgs, " ")
		g := groups[key]
		if g == nil {
			g = &group{pkgs: m.Pkgs}
			groups[key] = g
			order = append(order, key)
		}
		if m.Run == "" {
			g.all = true
		} else if !slices.Contains(g.runs, m.Run) {
			g.runs = append(g.runs, m.Run)
		}
	}
	errs := make([]error, len(order))
	parallel(len(order), jobs, func(i int) {
		g := groups[order[i]]
		run := ""
		if !g.all {
			run = "(" + strings.Join(g.runs, ")|(") + ")"
		}
		out, ok, err := r.goTest(ctx, "", run, g.pkgs)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("the unmutated tests of %s: %v\n%s", order[i], err, out)
		case !ok:
			errs[i] = fmt.Errorf("the unmutated tests of %s fail, so no mutant can be judged; fix them first:\n%s", order[i], out)
		}
	})
	return errors.Join(errs...)
}

// all tests every mutant, jobs at a time, printing a line as each ends.
func (r *runner) all(ctx context.Context, mutants []Mutant, jobs int) []result {
	results := make([]result, len(mutants))
	var mu sync.Mutex
	done := 0
	parallel(len(mutants), jobs, func(i int) {
		res := r.one(ctx, i, mutants[i])
		results[i] = res
		mu.Lock()
		done++
		fmt.Printf("[%d/%d] %-28s %-8s %5.1fs %s\n", done, len(mutants), res.m.Name, res.outcome, res.took.Seconds(), strings.Join(res.by, " "))
		mu.Unlock()
	})
	return results
}

func (o outcome) String() string {
	return [...]string{caught: "caught", survived: "SURVIVED", broken: "BROKEN"}[o]
}

// one plants mutant m through an overlay and runs its tests.
func (r *runner) one(ctx context.Context, i int, m Mutant) result {
	start := time.Now()
	res := r.try(ctx, i, m)
	res.took = time.Since(start)
	return res
}

func (r *runner) try(ctx context.Context, i int, m Mutant) result {
	res := result{m: m, outcome: broken}
	src, err := apply(r.root, r.table, m)
	if err != nil {
		res.output = err.Error()
		return res
	}
	dir := filepath.Join(r.tmp, fmt.Sprint(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.output = err.Error()
		return res
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	spec, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(r.root, m.File): mutated}})
	if err := errors.Join(os.WriteFile(mutated, src, 0o644), os.WriteFile(overlay, spec, 0o644)); err != nil {
		res.output = err.Error()
		return res
	}
	out, ok, err := r.goTest(ctx, overlay, m.Run, m.Pkgs)
	res.output = out
	switch {
	case err != nil:
		res.output = err.Error() + "\n" + out
	case ok:
		res.outcome = survived
	case buildFailed.MatchString(out):
		// a mutant that does not compile tells nothing
	default:
		res.outcome, res.by = caught, failedTests(out)
	}
	return res
}

var (
	buildFailed = regexp.MustCompile(`\[(build|setup) failed\]`)
	failLine    = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	panicLine   = regexp.MustCompile(`(?m)^panic: (.*)`)
)

// failedTests names the tests that failed, subtests folded into their
// test, or the panic or timeout that stopped the binary.
func failedTests(out string) []string {
	var names []string
	for _, m := range failLine.FindAllStringSubmatch(out, -1) {
		name, _, _ := strings.Cut(m[1], "/")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		if m := panicLine.FindStringSubmatch(out); m != nil {
			names = append(names, "panic: "+m[1])
		} else {
			names = append(names, "(go test failed)")
		}
	}
	return names
}

// parallel calls f(0..n-1), jobs at a time.
func parallel(n, jobs int, f func(int)) {
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// report prints the table of mutants and the tests that caught them, then
// the output of each that survived or broke, and returns an error unless
// every mutant was caught.
func report(w io.Writer, results []result, took time.Duration) error {
	fmt.Fprintf(w, "\n%-28s %-26s %-8s %s\n", "mutant", "file", "outcome", "caught by")
	var bad []string
	for _, res := range results {
		fmt.Fprintf(w, "%-28s %-26s %-8s %s\n", res.m.Name, res.m.File, res.outcome, strings.Join(res.by, " "))
		if res.outcome != caught {
			bad = append(bad, res.m.Name)
		}
	}
	for _, res := range results {
		switch res.outcome {
		case survived:
			fmt.Fprintf(w, "\nmutant %s (table line %d) SURVIVED: %s\n  %q -> %q in %s; the tests of %s -run %q all passed.\n  Add a test that fails with this bug.\n",
				res.m.Name, res.m.Line, res.m.Why, res.m.From, res.m.To, res.m.File, strings.Join(res.m.Pkgs, " "), res.m.Run)
		case broken:
			fmt.Fprintf(w, "\nmutant %s is BROKEN (it must build and its tests must run):\n%s\n", res.m.Name, tail(res.output, 3000))
		}
	}
	fmt.Fprintf(w, "\n%d mutants, %d caught, in %s\n", len(results), len(results)-len(bad), took.Round(time.Second))
	if len(bad) > 0 {
		return fmt.Errorf("%d mutants not caught: %s", len(bad), strings.Join(bad, ", "))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
