package profile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/profile"
)

// A perf model learned from runs on the CPU backend: traced runs teach the
// ops' durations, untraced ones the host's costs, and Save writes the file.
func Example() {
	dir, _ := os.MkdirTemp("", "profile")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()

	g := dag.New()
	x := g.Buffer("x", 4*1024, dag.Zeros())
	g.Launch(dag.Iota, dag.Grid1(4), dag.Grid1(256), x, 1.0)
	g.Launch(dag.Scale, dag.Grid1(4), dag.Grid1(256), x, 2.0)
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}

	key, _ := profile.Key(b, 0)
	l, err := profile.Load(filepath.Join(dir, "models.json"), key)
	if err != nil {
		panic(err)
	}
	p, err := planner.New(graph, planner.Cost(l.Model))
	if err != nil {
		panic(err)
	}
	l.Planned(p)

	const repeat = 4
	traced, _ := executor.Open(ctx, b, p, executor.WithTiming())
	for run := 1; run <= repeat; run++ {
		_ = traced.Run(ctx)
		_ = l.Observe(p.Graph, traced.Spans(), run, repeat)
	}
	_ = traced.Close()
	untraced, _ := executor.Open(ctx, b, p, executor.WithSubmitTiming())
	_ = profile.Untraced(ctx, repeat, untraced.Run, func(wall time.Duration, run int) {
		l.ObserveHost(untraced, wall, run, repeat)
	})
	_ = untraced.Close()

	u, err := l.Save()
	if err != nil {
		panic(err)
	}
	fmt.Printf("updated %v from %d op samples; %d eager runs measured\n", u.Updated, u.Samples, len(l.Eager()))
	// Output: updated true from 4 op samples; 2 eager runs measured
}

// The same with executor.Runner doing the loops: its observer hands the
// learner every run, traced (with WithTiming) or untraced.
func ExampleLearner_ObserveRun() {
	dir, _ := os.MkdirTemp("", "profile")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()

	g := dag.New()
	x := g.Buffer("x", 4*1024)
	g.Launch(dag.Iota, dag.Grid1(4), dag.Grid1(256), x, 1.0)
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}
	key, _ := profile.Key(b, 0)
	l, err := profile.Load(filepath.Join(dir, "models.json"), key)
	if err != nil {
		panic(err)
	}
	p, err := planner.New(graph, planner.Cost(l.Model))
	if err != nil {
		panic(err)
	}
	l.Planned(p)

	const repeat = 4
	learn := executor.WithObserver(func(o executor.Observation) error { return l.ObserveRun(o, repeat) })
	for _, timing := range []executor.Option{executor.WithTiming(), executor.WithSubmitTiming()} {
		r, err := executor.NewRunner(ctx, b, p, timing, learn)
		if err != nil {
			panic(err)
		}
		if _, err := r.Run(ctx, repeat); err != nil {
			panic(err)
		}
		_ = r.Close()
	}
	u, err := l.Save()
	if err != nil {
		panic(err)
	}
	fmt.Printf("updated %v from %d op samples; %d eager runs measured\n", u.Updated, u.Samples, len(l.Eager()))
	// Output: updated true from 2 op samples; 2 eager runs measured
}
