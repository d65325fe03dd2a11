package perf_test

import (
	"context"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/stretchr/testify/assert"
)

func TestDefaultCost(t *testing.T) {
	b := dag.New()
	pinned := b.Buffer("pinned", 1<<20, dag.PinnedHost())
	pageable := b.Buffer("pageable", 1<<20, dag.PageableHost())
	dev, dev2 := b.Buffer("dev", 1<<20), b.Buffer("dev2", 1<<20)
	tmp := b.Buffer("tmp", 1<<20, dag.Temporary())
	ops := map[string]*dag.Op{
		"spin":       b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 50.0),
		"costed":     b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 50.0, dag.Cost(time.Millisecond)),
		"scale":      b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), dev, 2.0),
		"h2d pinned": b.Copy(dev.All(), pinned.All()),
		"d2h pinned": b.Copy(pinned.All(), dev.All()),
		"h2d paged":  b.Copy(dev.All(), pageable.All()),
		"d2d":        b.Copy(dev2.All(), dev.All()),
		"fill":       b.Fill(dev.All(), 0),
		"alloc":      b.Alloc(tmp),
		"host":       b.Host(func(context.Context, [][]byte) error { return nil }, dag.In(pinned.All())),
	}
	us := func(f float64) time.Duration { return time.Duration(f * float64(time.Microsecond)) }
	mib := float64(1 << 20)
	for name, want := range map[string]time.Duration{
		"spin":       us(51),
		"costed":     time.Millisecond,
		"scale":      us(1 + mib/1.5e6),
		"h2d pinned": us(8 + mib/54e3),
		"d2h pinned": us(8 + mib/54e3),
		"h2d paged":  us(8 + mib/7e3),
		"d2d":        us(8 + mib/1.5e6),
		"fill":       us(1 + mib/1.5e6),
		"alloc":      us(1),
		"host":       us(20),
	} {
		assert.InDelta(t, float64(want), float64(perf.DefaultCost().Duration(ops[name])), 2, name)
	}
	assert.Greater(t, perf.DefaultCost().Duration(ops["h2d paged"]), perf.DefaultCost().Duration(ops["h2d pinned"]))
}

func TestMeasuredCost(t *testing.T) {
	g := plannertest.Build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 64, dag.Zeros())
		b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0, dag.Name("measured"))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0, dag.Name("unmeasured"), dag.Cost(3*time.Microsecond))
	})
	m := perf.Measured(map[string]time.Duration{"measured": 7 * time.Microsecond}, perf.WithOverheads(nil, perf.Overheads{}))
	assert.Equal(t, 7*time.Microsecond, m.Duration(g.Ops[0]))
	assert.Equal(t, 3*time.Microsecond, m.Duration(g.Ops[1]), "falls back to the default model")
	p := plannertest.New(t, g, planner.Cost(m))
	assert.Equal(t, 10*time.Microsecond, p.Stats.Makespan)
	assert.Equal(t, 10*time.Microsecond, p.Stats.CriticalPath)
}
