package main

// Perf models in the CLI: --perf-model FILE on plan and run. Package
// profile does the learning and package job the runs; this file loads.

import (
	"flag"
	"fmt"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
)

// loadPerfModel reads path for device dev of backend b (a spec's plan is
// keyed by device 0; a rank's by its own). A file that cannot be used is a
// warning on stderr: the model is then empty, so the plan uses default
// costs, and the file is not overwritten.
func (c *cli) loadPerfModel(cmd, path string, b device.Backend, dev int) (*profile.Learner, error) {
	key, err := profile.Key(b, dev)
	if err != nil {
		return nil, fmt.Errorf("--perf-model %s: %w", human.Quote(path), err)
	}
	l, err := profile.Load(path, key)
	if err != nil {
		return nil, err
	}
	if l.Unusable != nil {
		c.warn(cmd)(l.Unusable.Error())
	}
	return l, nil
}

// warn is how command cmd warns on stderr.
func (c *cli) warn(cmd string) func(string) {
	return func(msg string) { fmt.Fprintf(c.stderr, "dagrun %s: warning: %s\n", cmd, msg) }
}

// planPerfFlags are dagrun plan's perf-model flags.
type planPerfFlags struct {
	path    string
	backend *oneOf
	graph   bool
}

func (f *planPerfFlags) addFlags(fs *flag.FlagSet) {
	f.backend = backendFlag()
	f.backend.value = "auto"
	fs.StringVar(&f.path, "perf-model", "", "")
	fs.Var(f.backend, "backend", "")
	fs.BoolVar(&f.graph, "graph", false, "")
}

// planPerf plans s as makePlan does, or with --perf-model, with the model
// of the device --backend names (the backend is opened only to name its
// device) for the mode --graph says.
func (c *cli) planPerf(s *spec.Spec, l job.Layout, f planPerfFlags) (*planner.Plan, *profile.Learner, error) {
	if f.path == "" {
		if f.graph {
			return nil, nil, usagef("--graph chooses the mode --perf-model estimates; add --perf-model FILE")
		}
		p, err := makePlan(s, l)
		return p, nil, err
	}
	b, _, _, err := openBackend(f.backend.value, false)
	if err != nil {
		return nil, nil, err
	}
	pm, err := c.loadPerfModel("plan", f.path, b, 0)
	var mach executor.Machine
	if err == nil {
		mach, err = executor.MachineOf(b, s.Graph)
	}
	if cerr := b.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the backend: %w", cerr)
	}
	if err != nil {
		return nil, nil, err
	}
	p, err := job.PlanWithModel(s, l.PlanOptions(s), pm, job.Mode(f.graph), mach, c.warn("plan"))
	return p, pm, planFailure(s, err)
}
