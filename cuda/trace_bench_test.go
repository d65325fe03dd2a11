package cuda

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// BenchmarkTracing is workload E (8 chains x 100 empty kernels, launch-bound)
// run eagerly with timing off and with timing on (timing events around every
// op, spans read back), alternating run by run in one process, so that the
// difference is the cost of tracing per op.
func BenchmarkTracing(b *testing.B) {
	const nchains, length = 8, 100
	g := chains(nchains, length, dag.Empty, 0, false)
	p, err := planner.New(g, planner.Options{Streams: nchains})
	require.NoError(b, err)
	ctx := context.Background()
	plain, err := executor.Open(ctx, gpuBackend(b), p)
	require.NoError(b, err)
	defer plain.Close()
	traced, err := executor.Open(ctx, gpuBackend(b), p, executor.WithTiming())
	require.NoError(b, err)
	defer traced.Close()
	run := func(s *executor.Session) func() error { return func() error { return s.Run(ctx) } }
	for range 3 {
		require.NoError(b, plain.Run(ctx))
		require.NoError(b, traced.Run(ctx))
	}
	require.Len(b, traced.Spans(), nchains*length, "a traced run times every op")
	var off, on []time.Duration
	b.ResetTimer()
	for range b.N {
		off = append(off, timeIt(b, run(plain)))
		on = append(on, timeIt(b, run(traced)))
	}
	b.StopTimer()
	n := float64(nchains * length)
	moff, mon := median(off), median(on)
	b.ReportMetric(float64(moff.Nanoseconds())/n/1e3, "off-us/op")
	b.ReportMetric(float64(mon.Nanoseconds())/n/1e3, "on-us/op")
	b.ReportMetric(float64((mon-moff).Nanoseconds())/n/1e3, "tracing-us/op")
}
