//go:build cgo

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

// BenchmarkSessionOpenClose: executor.Open (buffers made and filled,
// kernels found in the backend's cache, the plan's streams and events made)
// and Session.Close of each example and of the 800-op workload C plan, on a
// warm backend, beside a raw C loop that makes and releases the same
// streams, events and buffers in the same run. The targets: at most
// 1 ms open and 0.5 ms close for the examples, 2 ms and 1 ms for workload C.
func BenchmarkSessionOpenClose(b *testing.B) {
	type plan struct {
		name string
		p    *planner.Plan
	}
	var plans []plan
	for _, ex := range examplePlans(b) {
		plans = append(plans, plan{ex.name, ex.p})
	}
	const nchains, length = 8, 100
	c, err := planner.New(chains(nchains, length, dag.Spin, 10, false), planner.Streams(nchains))
	require.NoError(b, err)
	plans = append(plans, plan{"workload_C", c})
	be := gpuBackend(b)
	ctx := context.Background()
	for _, pl := range plans {
		b.Run(pl.name, func(b *testing.B) {
			raw, err := newRawSession(be, len(pl.p.Streams), pl.p.Events, pl.p.Graph)
			require.NoError(b, err)
			defer raw.free()
			var open, closing, rawOpen, rawClose []time.Duration
			once := func() error {
				t0 := time.Now()
				s, err := executor.Open(ctx, be, pl.p)
				if err != nil {
					return err
				}
				t1 := time.Now()
				if err := s.Close(); err != nil {
					return err
				}
				t2 := time.Now()
				if err := raw.open(); err != nil {
					return err
				}
				t3 := time.Now()
				if err := raw.close(); err != nil {
					return err
				}
				t4 := time.Now()
				open, closing = append(open, t1.Sub(t0)), append(closing, t2.Sub(t1))
				rawOpen, rawClose = append(rawOpen, t3.Sub(t2)), append(rawClose, t4.Sub(t3))
				return nil
			}
			for range 3 { // warm up: modules loaded, pool and allocator settled
				require.NoError(b, once())
			}
			open, closing, rawOpen, rawClose = nil, nil, nil, nil
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				require.NoError(b, once())
			}
			b.StopTimer()
			ms := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e6 }
			b.ReportMetric(ms(open), "open-ms")
			b.ReportMetric(ms(closing), "close-ms")
			b.ReportMetric(ms(rawOpen), "raw-open-ms")
			b.ReportMetric(ms(rawClose), "raw-close-ms")
			b.ReportMetric(ms(open)/ms(rawOpen), "open/raw")
			b.ReportMetric(ms(closing)/ms(rawClose), "close/raw")
			assertReleased(b, be, pl.name)
		})
	}
}

// BenchmarkSessionRun: one eager run of each example on a session of a
// warm backend (open, run, close).
func BenchmarkSessionRun(b *testing.B) {
	be := gpuBackend(b)
	ctx := context.Background()
	for _, ex := range examplePlans(b) {
		b.Run(ex.name, func(b *testing.B) {
			s, err := executor.Open(ctx, be, ex.p)
			require.NoError(b, err)
			defer s.Close()
			require.NoError(b, s.Run(ctx))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				require.NoError(b, s.Run(ctx))
			}
		})
	}
}
