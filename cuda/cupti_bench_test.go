package cuda

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// BenchmarkCUPTITracing measures the driver's floor for tracing workload E
// (8 streams x 100 empty kernels from one C loop) with CUPTI against timing
// events. CUPTI, once enabled, instruments every launch in the process, so
// the runs come in two phases: without CUPTI, the plain loop and the loop
// with one timing event per launch (read back), alternating; then with the
// tracer on, the loop with an op id pushed and popped around each launch and
// the records flushed and resolved (a traced run), beside the plain loop
// (CUPTI's cost without naming ops).
//
// CUPTI stays loaded in the process once used, which would perturb every
// benchmark after this one, so it runs only with DAGRUN_BENCH_CUPTI=1, in a
// process of its own (scripts/gpu/cupti.sh).
func BenchmarkCUPTITracing(b *testing.B) {
	if os.Getenv("DAGRUN_BENCH_CUPTI") != "1" {
		b.Skip("set DAGRUN_BENCH_CUPTI=1 to run it, alone in its process (scripts/gpu/cupti.sh)")
	}
	const nstreams, rounds = 8, 100
	be := gpuBackend(b)
	defer openSession(b, be, chains(nstreams, 1, dag.Empty, 0, false)).Close()
	raw, err := newRawLoop(be, nstreams, dag.Normal, dag.Empty, 0)
	require.NoError(b, err)
	defer raw.close()

	type loop struct {
		name string
		f    func() error
		t    []time.Duration
	}
	measure := func(b *testing.B, loops []loop) map[string]float64 {
		for range 3 {
			for _, l := range loops {
				require.NoError(b, l.f())
			}
		}
		for range b.N {
			for i := range loops {
				loops[i].t = append(loops[i].t, timeIt(b, loops[i].f))
			}
		}
		us := map[string]float64{}
		for _, l := range loops {
			us[l.name] = float64(median(l.t).Nanoseconds()) / float64(nstreams*rounds) / 1e3
		}
		return us
	}
	b.ReportAllocs()
	us := measure(b, []loop{
		{name: "raw", f: func() error { return raw.launchesC(rounds) }},
		{name: "raw-events", f: func() error { return raw.timedC(rounds, 1, true) }},
	})

	tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
	if err != nil {
		b.Skipf("no CUPTI: %v", err)
	}
	defer tr.close()
	var records int
	traced := func() error {
		if err := raw.tracedLaunchesC(tr, rounds, 0); err != nil {
			return err
		}
		recs, err := tr.flush()
		records = len(recs)
		return err
	}
	for k, v := range measure(b, []loop{
		{name: "raw-cupti-on", f: func() error { return raw.launchesC(rounds) }},
		{name: "raw-cupti", f: traced},
	}) {
		us[k] = v
	}
	require.Equal(b, nstreams*rounds, records, "every launch has its record")
	for _, name := range []string{"raw", "raw-events", "raw-cupti-on", "raw-cupti"} {
		b.ReportMetric(us[name], name+"-us/op")
	}
	b.ReportMetric(us["raw-cupti"]-us["raw"], "cupti-tracing-us/op")
	b.ReportMetric(us["raw-events"]-us["raw"], "event-tracing-us/op")
	b.ReportMetric(us["raw-cupti"]/us["raw"], "cupti/raw")
	b.ReportMetric(float64(tr.dropped()), "dropped")
}

// BenchmarkCUPTISessionTracing is dagrun's own tracing cost, beside the
// floors of BenchmarkCUPTITracing. E: workload E (8 chains x 100 empty
// kernels) run eagerly through executor sessions with timing off, timed by
// events, and timed by CUPTI (records flushed and turned into spans at
// each run's end), alternating run by run; reported per op. C-replay:
// workload C (8 streams x 100 kernels spinning 10 us) captured once and
// replayed, without CUPTI and with the node-level tracer on (every
// replay's records flushed and resolved), alternating; reported as the
// tracing's share of the replay's makespan (the issue asks at most 3%).
// Like BenchmarkCUPTITracing it needs DAGRUN_BENCH_CUPTI=1 and a process
// of its own.
func BenchmarkCUPTISessionTracing(b *testing.B) {
	if os.Getenv("DAGRUN_BENCH_CUPTI") != "1" {
		b.Skip("set DAGRUN_BENCH_CUPTI=1 to run it, alone in its process (scripts/gpu/profile.sh)")
	}
	type loop struct {
		name string
		f    func() error
		t    []time.Duration
	}
	measure := func(b *testing.B, loops []loop) map[string]time.Duration {
		for range 3 {
			for _, l := range loops {
				require.NoError(b, l.f())
			}
		}
		for range b.N {
			for i := range loops {
				loops[i].t = append(loops[i].t, timeIt(b, loops[i].f))
			}
		}
		out := map[string]time.Duration{}
		for _, l := range loops {
			out[l.name] = median(l.t)
		}
		return out
	}
	b.Run("E", func(b *testing.B) {
		const nchains, length = 8, 100
		p, err := planner.New(chains(nchains, length, dag.Empty, 0, false), planner.Options{Streams: nchains})
		require.NoError(b, err)
		ctx := context.Background()
		be := gpuBackend(b)
		open := func(opts ...executor.Option) *executor.Session {
			s, err := executor.Open(ctx, be, p, opts...)
			require.NoError(b, err)
			b.Cleanup(func() { s.Close() })
			return s
		}
		off := open()
		events := open(executor.WithTiming(), executor.WithTimingSource(TimingEvents))
		cupti := open(executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
		if src, why, _ := cupti.TimingSource(); src != TimingCUPTI {
			b.Skipf("CUPTI timing not used: %s", why)
		}
		run := func(s *executor.Session) func() error { return func() error { return s.Run(ctx) } }
		t := measure(b, []loop{{name: "off", f: run(off)}, {name: "events", f: run(events)}, {name: "cupti", f: run(cupti)}})
		require.Len(b, cupti.Spans(), nchains*length, "a CUPTI-timed run has every kernel's span")
		_, _, dropped := cupti.TimingSource()
		n := float64(nchains * length)
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n / 1e3 }
		b.ReportMetric(us(t["off"]), "off-us/op")
		b.ReportMetric(us(t["events"]-t["off"]), "events-tracing-us/op")
		b.ReportMetric(us(t["cupti"]-t["off"]), "cupti-tracing-us/op")
		b.ReportMetric(float64(t["cupti"])/float64(t["off"]), "cupti/off")
		b.ReportMetric(float64(dropped), "dropped")
	})
	b.Run("C-replay", func(b *testing.B) {
		const nstreams, rounds = 8, 100
		be := gpuBackend(b)
		defer openSession(b, be, chains(nstreams, 1, dag.Spin, 10, false)).Close()
		raw, err := newRawLoop(be, nstreams, dag.Normal, dag.Spin, 10)
		require.NoError(b, err)
		defer raw.close()
		rg, err := newRawGraph(raw, rounds)
		require.NoError(b, err)
		defer rg.close()
		// CUPTI instruments the process once on: first the replays without
		// it, then with the node-level tracer on, each replay's records
		// flushed and resolved.
		off := measure(b, []loop{{name: "off", f: func() error { return rg.launches(1) }}})["off"]
		tr, err := newActivityTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
		if err != nil {
			b.Skipf("no CUPTI: %v", err)
		}
		defer tr.close()
		var records int
		traced := func() error {
			if err := tr.tracedCall(1, func() error { return rg.launches(1) }); err != nil {
				return err
			}
			recs, err := tr.flush()
			records = len(recs)
			return err
		}
		on := measure(b, []loop{{name: "traced", f: traced}})["traced"]
		require.Equal(b, nstreams*rounds, records, "every replayed kernel has its record")
		b.ReportMetric(float64(off.Nanoseconds())/1e3, "replay-us")
		b.ReportMetric(float64(on.Nanoseconds())/1e3, "traced-replay-us")
		b.ReportMetric(100*float64(on-off)/float64(off), "tracing-%")
		b.ReportMetric(float64(tr.dropped()), "dropped")
	})
}
