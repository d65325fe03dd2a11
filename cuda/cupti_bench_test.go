package cuda

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
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
