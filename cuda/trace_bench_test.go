//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// BenchmarkTracing runs 8 chains x 100 kernels eagerly with timing off and
// with timing on (timing events around the ops, spans read back),
// alternating run by run in one process, so that the difference is the
// cost of tracing per op. E (empty kernels) is launch-bound, the worst
// case: every timing event the host records delays the next launch. C50
// (kernels spinning 50 us) is device-bound, so most of that host time hides
// behind the device's. Beside E, the same launches from one C loop, plain
// and with one or two timing events per launch (their times read back, or
// not): the driver's own floor for tracing.
func BenchmarkTracing(b *testing.B) {
	b.Run("E", func(b *testing.B) { benchTracing(b, dag.Empty, 0) })
	b.Run("C50", func(b *testing.B) { benchTracing(b, dag.Spin, 50) })
}

func benchTracing(b *testing.B, k *dag.Kernel, spin float64) {
	const nchains, length = 8, 100
	g := chains(nchains, length, k, spin, false)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	ctx := context.Background()
	be := gpuBackend(b) // one backend, two sessions
	plain, err := executor.Open(ctx, be, p)
	require.NoError(b, err)
	defer plain.Close()
	traced, err := executor.Open(ctx, be, p, executor.WithTiming())
	require.NoError(b, err)
	defer traced.Close()

	type loop struct {
		name string
		f    func() error
		t    []time.Duration
	}
	run := func(s *executor.Session) func() error { return func() error { return s.Run(ctx) } }
	loops := []loop{{name: "off", f: run(plain)}, {name: "on", f: run(traced)}}
	if k == dag.Empty {
		raw, err := newRawLoop(be, nchains, dag.Normal, k, spin)
		require.NoError(b, err)
		defer raw.close()
		loops = append(loops, loop{name: "raw", f: func() error { return raw.launchesC(length) }})
		for _, per := range []int{1, 2} {
			loops = append(loops,
				loop{name: fmt.Sprintf("raw-timed%d", per), f: func() error { return raw.timedC(length, per, true) }},
				loop{name: fmt.Sprintf("raw-timed%d-noread", per), f: func() error { return raw.timedC(length, per, false) }})
		}
	}
	for range 3 {
		for _, l := range loops {
			require.NoError(b, l.f())
		}
	}
	require.Len(b, traced.Spans(), nchains*length, "a traced run times every op")
	b.ResetTimer()
	for range b.N {
		for i := range loops {
			loops[i].t = append(loops[i].t, timeIt(b, loops[i].f))
		}
	}
	b.StopTimer()
	n := float64(nchains * length)
	us := map[string]float64{}
	for _, l := range loops {
		us[l.name] = float64(median(l.t).Nanoseconds()) / n / 1e3
		b.ReportMetric(us[l.name], l.name+"-us/op")
	}
	b.ReportMetric(us["on"]-us["off"], "tracing-us/op")
	b.ReportMetric(us["on"]/us["off"], "on/off")
	if k == dag.Empty {
		b.ReportMetric(us["raw-timed2"]-us["raw"], "raw-tracing-us/op")
		b.ReportMetric(us["off"]/us["raw"], "off/raw")
	}
}
