// Command mutcheck plants known bugs in the safety-critical code, one at a
// time, and fails unless the tests catch every one. Each mutant of the
// table replaces one snippet of one file; the file is swapped in with go
// test -overlay, so that the tree is never touched, and the packages' short
// tests that the mutant names are run. A mutant that survives, a snippet
// that no longer matches its file, or a mutant that does not build fails
// the check.
//
// Usage:
//
//	go run ./internal/mutcheck [-table FILE] [-j N] [-only NAME] [-list]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	table := flag.String("table", "internal/mutcheck/mutants.txt", "the table of mutants, relative to the module root")
	jobs := flag.Int("j", min(runtime.NumCPU(), 4), "mutants tested at once")
	only := flag.String("only", "", "test only the mutants whose names contain this")
	list := flag.Bool("list", false, "check the table's snippets and list the mutants, running nothing")
	baseline := flag.Bool("baseline", true, "first run the tests unmutated, which must pass")
	timeout := flag.Duration("timeout", 4*time.Minute, "the longest one mutant's tests may run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, config{table: *table, jobs: max(*jobs, 1), only: *only, list: *list, baseline: *baseline, timeout: *timeout}); err != nil {
		fmt.Fprintln(os.Stderr, "mutcheck:", err)
		os.Exit(1)
	}
}

type config struct {
	table    string
	jobs     int
	only     string
	list     bool
	baseline bool
	timeout  time.Duration
}

func run(ctx context.Context, cfg config) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run from the module root (no go.mod in %s)", root)
	}
	f, err := os.Open(filepath.Join(root, cfg.table))
	if err != nil {
		return err
	}
	mutants, err := parseTable(cfg.table, f)
	f.Close()
	if err != nil {
		return err
	}
	if cfg.only != "" {
		var keep []Mutant
		for _, m := range mutants {
			if strings.Contains(m.Name, cfg.only) {
				keep = append(keep, m)
			}
		}
		mutants = keep
	}
	// Every snippet is checked before anything runs, so that a table gone
	// stale is reported whole and at once.
	var stale []string
	for _, m := range mutants {
		if _, err := apply(root, cfg.table, m); err != nil {
			stale = append(stale, err.Error())
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%d of %d mutants no longer match the source:\n%s", len(stale), len(mutants), strings.Join(stale, "\n"))
	}
	if cfg.list {
		for _, m := range mutants {
			fmt.Printf("%-28s %s  (%s -run %q)\n", m.Name, m.File, strings.Join(m.Pkgs, " "), m.Run)
		}
		fmt.Printf("%d mutants, every snippet found\n", len(mutants))
		return nil
	}
	tmp, err := os.MkdirTemp("", "mutcheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &runner{root: root, tmp: tmp, table: cfg.table, timeout: cfg.timeout}
	start := time.Now()
	if cfg.baseline {
		if err := r.baseline(ctx, mutants, cfg.jobs); err != nil {
			return err
		}
	}
	results := r.all(ctx, mutants, cfg.jobs)
	return report(os.Stdout, results, time.Since(start))
}
