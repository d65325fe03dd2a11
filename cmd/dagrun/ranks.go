package main

// Ranks: dagrun run of a spec as a world of N ranks, all in this process
// (run.world or --world N) or one rank per process (--rank R --world W, or
// the variables of torchrun, Slurm or Open MPI).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/atomicfile"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/spec"
)

// rankFlags are dagrun run's flags for ranks.
type rankFlags struct {
	world, rank int
	timeout     time.Duration
}

func (r *rankFlags) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&r.world, "world", 0, "")
	fs.IntVar(&r.rank, "rank", 0, "")
	fs.DurationVar(&r.timeout, "rank-timeout", 0, "")
}

// rankMode is how a run spans ranks: every rank of a world in this
// process (place nil), or one rank of a world of processes.
type rankMode struct {
	world int
	place *executor.Place
}

// ranks decides the rank mode of a run of s from the flags and the
// environment; nil means an ordinary run of one rank.
func (f *runFlags) rankMode(s *spec.Spec, getenv func(string) string) (*rankMode, error) {
	set := f.set
	if set["rank-timeout"] && f.ranking.timeout <= 0 {
		return nil, usagef("--rank-timeout %s: give a positive duration", f.ranking.timeout)
	}
	if set["world"] && (f.ranking.world < 1 || f.ranking.world > maxWorld) {
		return nil, usagef("--world %d: a world has 1 to %d ranks", f.ranking.world, maxWorld)
	}
	own := s.Run.World
	var place *executor.Place
	switch {
	case set["rank"]:
		if !set["world"] {
			return nil, usagef("--rank %d needs --world W, the number of ranks", f.ranking.rank)
		}
		p, err := comm.Explicit(f.ranking.rank, f.ranking.world, getenv)
		if err != nil {
			return nil, usagef("--rank %d --world %d: %v", f.ranking.rank, f.ranking.world, err)
		}
		place = &p
	case !set["world"]:
		p, ok, err := comm.Discover(getenv)
		if err != nil {
			return nil, usagef("%v", err)
		}
		if ok && p.World > 1 {
			if own > 1 && own != p.World {
				return nil, usagef("%s sets run.world: %d, but %s started a world of %d processes", s.File, own, p.Launcher, p.World)
			}
			if p.World > maxWorld {
				return nil, usagef("%s started a world of %d processes; at most %d ranks", p.Launcher, p.World, maxWorld)
			}
			place = &p
		}
	}
	if place != nil {
		return &rankMode{world: place.World, place: place}, nil
	}
	world := own
	if set["world"] {
		world = f.ranking.world
	}
	if world < 1 || (world == 1 && own <= 1) {
		// One rank, as the spec was loaded: an ordinary run.
		return nil, nil
	}
	return &rankMode{world: world}, nil
}

// maxWorld bounds the ranks of one world: each is a session with its own
// goroutines, and in one process its own device.
const maxWorld = 1024

// runRanks runs the ranks of su, opened by openRun, and reports every
// rank's outputs.
func (c *cli) runRanks(f *runFlags, su *runSetup, m *rankMode) error {
	ctx := c.interruptContext()
	cfg := c.jobConfig(f, su)
	cfg.World, cfg.Place = m.world, m.place
	if f.set["rank-timeout"] {
		cfg.RankTimeout = f.ranking.timeout
	}
	if m.place != nil {
		cfg.RankWaiting = rankWaiting(c.stderr, m.place.Rank)
	}
	rs := su.progs
	rep, err := job.RunWorld(ctx, su.b, rs, cfg)
	if re, ok := errors.AsType[*job.RunError](err); ok {
		at := interruptedAt{done: re.Done, repeat: re.Repeat}
		if ctx.Err() != nil && f.traceFile != "" && re.Traced {
			// An interrupt keeps the traces of the runs that completed.
			var written bytes.Buffer
			if werr := writeRankTraces(&written, f.traceFile, rep, rs); werr != nil {
				at.trace = fmt.Sprintf("the traces of the runs that completed could not be written: %v", werr)
			} else {
				at.trace = "the traces of the runs that completed were written: " + strings.ReplaceAll(strings.TrimSpace(written.String()), "\n", "; ")
			}
		}
		return c.rankFailure(ctx, rs, re.Err, at)
	}
	if err != nil {
		return err
	}
	if f.perfModel != "" {
		if err := rep.SaveModels(rs); err != nil {
			return err
		}
	}
	var traces bytes.Buffer
	if f.traceFile != "" {
		if err := writeRankTraces(&traces, f.traceFile, rep, rs); err != nil {
			return err
		}
	}
	if f.format.value == "json" {
		if _, err := traces.WriteTo(c.stderr); err != nil {
			return err
		}
		return c.writeOutput(f.out, func(w io.Writer) error { return writeJSON(w, rep) })
	}
	return c.writeOutput(f.out, func(w io.Writer) error {
		if err := rep.WriteText(w, rs); err != nil {
			return err
		}
		_, err := traces.WriteTo(w)
		return err
	})
}

// writeRankTraces writes each rank's trace of the runs it kept to file
// ({rank} expanded), whole or not at all, and a line for each to w.
func writeRankTraces(w io.Writer, file string, rep *job.WorldReport, rs []*job.Program) error {
	for i, t := range rep.Traces(rs) {
		path := spec.ExpandRank(file, rs[i].Rank)
		if err := atomicfile.Write(path, t.WriteChrome); err != nil {
			return err
		}
		fmt.Fprintf(w, "trace of rank %d written to %s\n", rs[i].Rank, path)
	}
	return nil
}

// rankFailure is the failure of a run of ranks: the failing op placed in
// its rank's spec, with the rank named.
func (c *cli) rankFailure(ctx context.Context, rs []*job.Program, err error, at interruptedAt) error {
	s, p := job.WorldProblem(rs, err)
	return c.runFailure(ctx, s, p, nil, at)
}

// loadRank loads the spec at path as rank's program in a world of world
// ranks.
func (c *cli) loadRank(path string, o specFiles, rank, world int) (*spec.Spec, error) {
	o.extra = []spec.Option{spec.WithRank(rank, world)}
	return c.load(path, o)
}

// rankWaiting makes a rank say on stderr whom its rendezvous waits for,
// every few seconds, as torchrun does: a rank that waits in silence looks
// hung.
func rankWaiting(stderr io.Writer, rank int) func(missing []int, waited time.Duration) {
	return func(missing []int, waited time.Duration) {
		who := make([]string, len(missing))
		for i, r := range missing {
			who[i] = strconv.Itoa(r)
		}
		s := ""
		if len(missing) > 1 {
			s = "s"
		}
		fmt.Fprintf(stderr, "dagrun run: rank %d: waiting for rank%s %s (%s so far; --rank-timeout bounds it)\n",
			rank, s, strings.Join(who, ", "), human.Duration(waited.Round(time.Second)))
	}
}
