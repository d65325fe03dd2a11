package main

// Ranks: dagrun run of a spec as a world of N ranks, all in this process
// (run.world or --world N) or one rank per process (--rank R --world W, or
// the variables of torchrun, Slurm or Open MPI).

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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

// rankMode decides the world a run of s spans from the flags, the
// environment and the spec; nil means an ordinary run of one rank.
func (f *runFlags) rankMode(s *spec.Spec, getenv func(string) string) (*job.World, error) {
	set := f.set
	if set["rank-timeout"] && f.ranking.timeout <= 0 {
		return nil, usagef("--rank-timeout %s: give a positive duration", f.ranking.timeout)
	}
	if set["world"] && (f.ranking.world < 1 || f.ranking.world > job.MaxWorld) {
		return nil, usagef("--world %d: a world has 1 to %d ranks", f.ranking.world, job.MaxWorld)
	}
	if set["rank"] {
		if !set["world"] {
			return nil, usagef("--rank %d needs --world W, the number of ranks", f.ranking.rank)
		}
		p, err := comm.Explicit(f.ranking.rank, f.ranking.world, getenv)
		if err != nil {
			return nil, usagef("--rank %d --world %d: %v", f.ranking.rank, f.ranking.world, err)
		}
		return &job.World{Size: p.World, Place: &p}, nil
	}
	world := 0
	if set["world"] {
		world = f.ranking.world
	}
	m, err := job.WorldOf(s, world, getenv)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return m, nil
}

// runRanks runs the ranks of su, opened by openRun, and reports every
// rank's outputs.
func (c *cli) runRanks(f *runFlags, su *runSetup, m *job.World) error {
	ctx := c.interruptContext()
	cfg := f.jobConfig(su)
	cfg.World, cfg.Place = m.Size, m.Place
	if f.set["rank-timeout"] {
		cfg.RankTimeout = f.ranking.timeout
	}
	if m.Place != nil {
		cfg.RankWaiting = rankWaiting(c.stderr, m.Place.Rank)
	}
	rs := su.progs
	rep, err := job.RunWorld(ctx, su.b, rs, cfg)
	if re, ok := errors.AsType[*job.RunError](err); ok {
		at := re.Interrupted()
		if ctx.Err() != nil && f.traceFile != "" && re.Traced {
			// An interrupt keeps the traces of the runs that completed.
			var written bytes.Buffer
			if werr := writeRankTraces(&written, f.traceFile, rep, rs); werr != nil {
				at += fmt.Sprintf("; the traces of the runs that completed could not be written: %v", werr)
			} else {
				at += "; the traces of the runs that completed were written: " + strings.ReplaceAll(strings.TrimSpace(written.String()), "\n", "; ")
			}
		}
		// The failing op is placed in its rank's spec, with the rank named.
		s, p := job.WorldProblem(rs, re.Err)
		return c.runFailure(ctx, s, p, nil, at)
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
	return c.writeReport(f, rep, func(w io.Writer) error { return rep.WriteText(w, rs) }, &traces)
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
