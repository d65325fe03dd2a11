package main

// The opening that dagrun run shares with its ranks: specs loaded and
// planned, the paths they write checked, the backend opened, perf models
// loaded and the plans made again with what the backend knows.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/spec"
)

// runSetup is what a run's opening made. The caller closes b.
type runSetup struct {
	b      device.Backend
	used   string // the backend's name
	progs  []*job.Program
	traced func(run int) bool // which runs --trace keeps; nil: none
	faults []executor.Option  // --chaos and --fail-op
}

// openRun opens the run of s, the spec at path, or with m, the ranks m
// names: each loaded as its own program.
func (c *cli) openRun(f *runFlags, path string, s *spec.Spec, m *job.World) (*runSetup, error) {
	su := &runSetup{}
	var err error
	if m == nil {
		if err := checkFileUses(f.fileUses(s, f.out, f.traceFile, f.perfModel)); err != nil {
			return nil, err
		}
		su.progs = []*job.Program{{Spec: s}}
	} else if su.progs, err = c.loadRanks(f, path, m); err != nil {
		return nil, err
	}
	if f.traceFile != "" {
		if su.traced, err = job.ParseRuns(f.traceRuns, f.repeat); err != nil {
			return nil, usagef("--trace-runs %q: %v", f.traceRuns, err)
		}
	}
	if err := f.faults.checkGraph(f.graph, f.set["graph"], s); err != nil { // faults.go
		return nil, err
	}
	su.faults = f.faults.options()
	for _, r := range su.progs {
		if r.Plan, err = makePlan(r.Spec, f.layout()); err != nil {
			return nil, err
		}
		if f.graph {
			// Before the backend is opened: a plan a graph cannot hold is
			// refused without touching a device.
			if err := executor.CheckCapture(r.Plan); err != nil {
				return nil, captureFailure(r.Spec, err, f.set["graph"])
			}
		}
	}
	b, used, err := c.openBackend(f)
	if err != nil {
		return nil, err
	}
	su.b, su.used = b, used
	if err := c.planForBackend(f, su, m); err != nil {
		b.Close()
		return nil, err
	}
	if used == "cpu" {
		if w := job.CPUWarning(su.progs, f.repeat); w != "" {
			c.warn("run")(w)
		}
	}
	return su, nil
}

// planForBackend loads each program's perf model (a rank's of its device)
// and plans again with it and with what the open backend knows of the
// machine. Collectives keep their declared order under every plan, so
// ranks still agree.
func (c *cli) planForBackend(f *runFlags, su *runSetup, m *job.World) error {
	for _, r := range su.progs {
		var err error
		if f.perfModel != "" {
			if r.Model, err = c.loadPerfModel("run", spec.ExpandRank(f.perfModel, r.Rank), su.b, r.Device); err != nil {
				return err
			}
			if m != nil {
				r.Model.Model.World = m.Size
			}
		}
		if err := r.Replan(su.b, f.layout(), job.Mode(f.graph), c.warn("run")); err != nil {
			return planFailure(r.Spec, err)
		}
	}
	return nil
}

// loadRanks loads the spec at path as the program of each rank m names,
// on its device, and checks what they write: two ranks writing one file
// is refused.
func (c *cli) loadRanks(f *runFlags, path string, m *job.World) ([]*job.Program, error) {
	if f.traceFile != "" && !strings.Contains(f.traceFile, "{rank}") {
		return nil, usagef("--trace %s: every rank writes its trace; put {rank} in the path, as in trace_{rank}.json", f.traceFile)
	}
	if f.perfModel != "" {
		if !strings.Contains(f.perfModel, "{rank}") {
			return nil, usagef("--perf-model %s: every rank keeps the model of its device; put {rank} in the path, as in models_{rank}.json", f.perfModel)
		}
		if f.graph {
			return nil, usagef("--perf-model: ranks learn their models from eager runs; run them without --graph (and without run.graph: true in the spec)")
		}
	}
	if m.Place != nil {
		if w := m.Place.Warning(); w != "" {
			fmt.Fprintf(c.stderr, "dagrun run: %s\n", w)
		}
	}
	ranks := m.Ranks()
	rs := make([]*job.Program, len(ranks))
	writers := map[string]int{} // path -> the rank that writes it
	hostMu := &sync.Mutex{}     // one line at a time from the ranks' host steps
	for i, r := range ranks {
		o := f.files
		o.extra = []spec.Option{spec.WithRank(r, m.Size)}
		s, err := c.load(path, o)
		if err != nil {
			return nil, err
		}
		if err := f.faults.check(s); err != nil {
			return nil, err
		}
		rs[i] = job.NewRank(s, r, m.Place, os.Getenv)
		tf, pm := spec.ExpandRank(f.traceFile, r), spec.ExpandRank(f.perfModel, r)
		var paths []string
		for _, out := range s.Outputs {
			if out.Save != "" {
				paths = append(paths, s.SavePath(out.Save))
			}
		}
		if err := checkFileUses(f.fileUses(s, f.out, tf, pm)); err != nil {
			return nil, err
		}
		for _, pt := range append(paths, tf, pm) {
			if other, ok := writers[pt]; ok && other != r && pt != "" {
				return nil, usagef("ranks %d and %d would both write %s: put {rank} in the path", other, r, pt)
			}
			writers[pt] = r
		}
		s.Stdout = job.RankWriter(c.hostOut(f), r, hostMu)
	}
	return rs, nil
}

// hostOut is where host steps print: stdout, except where the report goes
// there as JSON.
func (c *cli) hostOut(f *runFlags) io.Writer {
	if f.format.value == "json" && (f.out == "" || f.out == stdio) {
		return c.stderr
	}
	return c.stdout
}
