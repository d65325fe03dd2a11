//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"os"
	"slices"
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
// with its records flushed and resolved too (CUPTI's cost without naming
// ops).
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
		requireGPU(b, "no CUPTI: %v", err)
	}
	defer tr.close()
	var records int
	traced := func() error {
		if err := raw.tracedLaunchesC(tr, rounds, 0); err != nil {
			return err
		}
		recs, err := takeKernels(tr, nstreams*rounds)
		// The plain loop's launches beside it name no op (-1).
		records = 0
		for _, r := range recs {
			if r.Op >= 0 {
				records++
			}
		}
		return err
	}
	// Each loop reads its own records, so that raw-cupti - raw-cupti-on is
	// the naming alone (push, pop and the driver callback's pairing), not
	// also the reading of the other loop's records.
	unnamed := func() error {
		if err := raw.launchesC(rounds); err != nil {
			return err
		}
		_, err := takeKernels(tr, nstreams*rounds)
		return err
	}
	for k, v := range measure(b, []loop{
		{name: "raw-cupti-on", f: unnamed},
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

// chainsOn plans 8 chains of 100 launches of k (workload E with
// dag.Empty, C with a 10 us dag.Spin) on 8 streams, and opens a session of
// it on a GPU backend, untimed, closed at the end of the benchmark.
func chainsOn(b *testing.B, k *dag.Kernel, us float64) (*planner.Plan, *Backend, *executor.Session) {
	b.Helper()
	const nchains, length = 8, 100
	p, err := planner.New(chains(nchains, length, k, us, false), planner.Streams(nchains))
	require.NoError(b, err)
	be := gpuBackend(b)
	s, err := executor.Open(context.Background(), be, p)
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	return p, be, s
}

// takeKernels is how a raw loop reads its records the way a session does:
// CUPTI's default flush, and a forced one only if fewer than want kernel
// records came.
func takeKernels(tr *activityTracer, want int) ([]activityRecord, error) {
	return takeRecords(tr, activityKernel, want)
}

// takeRecords is takeKernels for records of kind k.
func takeRecords(tr *activityTracer, k activityKind, want int) ([]activityRecord, error) {
	if err := tr.take(false); err != nil {
		return tr.resolvePending(), err
	}
	n := 0
	for _, r := range tr.recs {
		if r.Kind == k {
			n++
		}
	}
	var err error
	if n < want {
		err = tr.take(true)
	}
	return tr.resolvePending(), err
}

// BenchmarkCUPTISessionTracing is dagrun's own tracing cost, beside the
// floors of BenchmarkCUPTITracing. E: workload E (8 chains x 100 empty
// kernels) run eagerly through executor sessions with timing off and timed
// by events, alternating run by run, then timed by CUPTI (records flushed
// and turned into spans at each run's end); reported per op. C-replay:
// workload C (8 streams x 100 kernels spinning 10 us) captured once and
// replayed 50 times back to back, untraced and traced the way a session
// traces replays (each launch marked with its replay, one flush at the
// batch's end, records split by replay), alternating batch by batch with
// the tracer started and stopped between them; reported per replay, with
// the tracing's share of the replays' makespan (launch to Sync returned:
// tracing-%, the issue asks at most 3%) apart from the host's processing
// of the records after the Sync (processing-us, processing-%), beside the
// makespan against replays before CUPTI was ever enabled
// (tracing-vs-pristine-%) and the old way, each replay launched alone and
// flushed (per-replay-flush-%). C-replay-whole: the same with the
// whole-graph tracer (graph-launch records only, one per launch, each
// checked). C-replay-session and C-replay-session-whole: the same through
// executor sessions timed by "cupti" and "cupti-graph", the spans read
// with Graph.ReplaySpans.
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
		p, be, off := chainsOn(b, dag.Empty, 0)
		ctx := context.Background()
		open := func(opts ...executor.Option) *executor.Session {
			s, err := executor.Open(ctx, be, p, opts...)
			require.NoError(b, err)
			b.Cleanup(func() { s.Close() })
			return s
		}
		run := func(s *executor.Session) func() error { return func() error { return s.Run(ctx) } }
		// Untraced and by events first, before the CUPTI session opens:
		// while one is open, CUPTI sees every launch of the process.
		events := open(executor.WithTiming(), executor.WithTimingSource(TimingEvents))
		t := measure(b, []loop{{name: "off", f: run(off)}, {name: "events", f: run(events)}})
		cupti := open(executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
		if src, why, _ := cupti.TimingSource(); src != TimingCUPTI {
			requireGPU(b, "CUPTI timing not used: %s", why)
		}
		t["cupti"] = measure(b, []loop{{name: "cupti", f: run(cupti)}})["cupti"]
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
	// E-raw: the ratio in one process and one tracer, so that the
	// raw floor and dagrun see the same machine state (apart, the raw loop's
	// CUPTI cost moved 2x between processes). Each iteration times the raw
	// C loop (800 launches, 8 streams breadth first, synchronised) and an
	// untimed session's run, then opens a session timed by CUPTI and times
	// the raw loop traced through that session's tracer (each launch named,
	// the records flushed and counted) and the timed session's run (records
	// flushed and turned into spans). Reported: the medians of each one's
	// CUPTI cost per op (traced less untraced, within an iteration) and
	// dagrun/raw, the at most 1.15x; beside them, the raw loop's
	// cost when it makes the context current before each launch, as
	// dagrun's launches do (raw-ctx-cupti-tracing).
	b.Run("E-raw", func(b *testing.B) {
		const nchains, length = 8, 100
		p, be, off := chainsOn(b, dag.Empty, 0)
		ctx := context.Background()
		raw, err := newRawLoop(be, nchains, dag.Normal, dag.Empty, 0)
		require.NoError(b, err)
		defer raw.close()
		offRun := func() error { return off.Run(ctx) }
		rawRun := func() error { return raw.launchesC(length) }
		// Each iteration times the four back to back, the traced two in a
		// session timed by CUPTI opened (starting the tracer) and closed
		// around them, untimed: the host's speed drifts between processes
		// and within one, so each one's cost is a difference within one
		// iteration.
		var rawCost, dagCost, ctxCost, extCost []time.Duration
		var records, spans int
		var dropped uint64
		for i := range 3 + b.N {
			uRaw, uOff := timeIt(b, rawRun), timeIt(b, offRun)
			uCtx := timeIt(b, func() error { return raw.launchesEachCtx(nil, length, 0) })
			cupti, err := executor.Open(ctx, be, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
			require.NoError(b, err)
			if src, why, _ := cupti.TimingSource(); src != TimingCUPTI {
				cupti.Close()
				requireGPU(b, "CUPTI timing not used: %s", why)
			}
			tr := cupti.Device().(*Session).tim.cupti.tr
			tracedRaw := func() error {
				if err := raw.tracedLaunchesC(tr, length, 0); err != nil {
					return err
				}
				recs, err := takeKernels(tr, nchains*length)
				records = 0
				for _, r := range recs {
					if r.Kind == activityKernel && r.Op >= 0 {
						records++
					}
				}
				return err
			}
			for range 2 { // the first runs after CUPTI is enabled
				require.NoError(b, tracedRaw())
				require.NoError(b, cupti.Run(ctx))
			}
			tRaw, tDag := timeIt(b, tracedRaw), timeIt(b, func() error { return cupti.Run(ctx) })
			tCtx := timeIt(b, func() error {
				if err := raw.launchesEachCtx(tr, length, 0); err != nil {
					return err
				}
				_, err := takeKernels(tr, nchains*length)
				return err
			})
			spans = len(cupti.Spans())
			_, _, d := cupti.TimingSource()
			dropped += d + tr.cuptiDropped()
			require.NoError(b, cupti.Close())
			// The same raw loop traced by a tracer that also names launches
			// by CUPTI's external correlation records, as sessions did.
			ext, err := newExternalTracer(cuptiCandidates(os.Getenv("DAGRUN_CUPTI")))
			require.NoError(b, err)
			tracedExt := func() error {
				if err := raw.tracedLaunchesC(ext, length, 0); err != nil {
					return err
				}
				_, err := takeKernels(ext, nchains*length)
				return err
			}
			for range 2 {
				require.NoError(b, tracedExt())
			}
			tExt := timeIt(b, tracedExt)
			require.NoError(b, ext.close())
			if i >= 3 {
				rawCost, dagCost = append(rawCost, tRaw-uRaw), append(dagCost, tDag-uOff)
				ctxCost = append(ctxCost, tCtx-uCtx)
				extCost = append(extCost, tExt-uRaw)
			}
		}
		require.Equal(b, nchains*length, records, "every raw launch has its record")
		require.Equal(b, nchains*length, spans, "a CUPTI-timed run has every kernel's span")
		n := float64(nchains * length)
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n / 1e3 }
		r, d := median(rawCost), median(dagCost)
		b.ReportMetric(us(r), "raw-cupti-tracing-us/op")
		b.ReportMetric(us(d), "cupti-tracing-us/op")
		b.ReportMetric(float64(d)/float64(r), "dagrun/raw-tracing")
		b.ReportMetric(float64(dropped), "dropped")
		quartiles := func(ds []time.Duration) string {
			s := slices.Clone(ds)
			slices.Sort(s)
			q := func(f float64) float64 { return us(s[int(f*float64(len(s)-1))]) }
			return fmt.Sprintf("%.2f / %.2f / %.2f", q(0.25), q(0.5), q(0.75))
		}
		b.ReportMetric(us(median(ctxCost)), "raw-ctx-cupti-tracing-us/op")
		b.ReportMetric(us(median(extCost)), "raw-external-cupti-tracing-us/op")
		b.Logf("CUPTI's cost per op over %d iterations, quartiles in us: raw loop %s, dagrun %s; the raw loop making the context current before each launch %s",
			len(rawCost), quartiles(rawCost), quartiles(dagCost), quartiles(ctxCost))
	})
	// Workload C replayed 50 times back to back, synchronised once, on a raw
	// graph (C-replay, C-replay-whole) and through executor sessions
	// (C-replay-session, C-replay-session-whole). Each traced batch is timed
	// in two parts: launch to Sync returned (the replays' makespan, which
	// tracing-% compares with the untraced batch's: the 3% is about
	// this) and reading the records after it (flush, resolve, spans: the
	// host's processing, reported apart as processing-us per replay and
	// processing-% of the untraced makespan).
	const nstreams, rounds, replays = 8, 100, 50
	type split struct{ sync, read []time.Duration }
	timeSplit := func(b *testing.B, s *split, run, read func() error) {
		start := time.Now()
		require.NoError(b, run())
		synced := time.Now()
		require.NoError(b, read())
		s.sync, s.read = append(s.sync, synced.Sub(start)), append(s.read, time.Since(synced))
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / replays / 1e3 }
	report := func(b *testing.B, off time.Duration, on split) {
		sync, read := median(on.sync), median(on.read)
		b.ReportMetric(us(off), "replay-us")
		b.ReportMetric(us(sync), "traced-replay-us")
		b.ReportMetric(100*float64(sync-off)/float64(off), "tracing-%")
		b.ReportMetric(us(read), "processing-us")
		b.ReportMetric(100*float64(read)/float64(off), "processing-%")
	}
	rawReplays := func(b *testing.B, graphLevel bool) {
		// Untraced (no tracer) against traced as a session traces replays
		// (each launch marked with its replay, one flush at the end, the
		// records split by replay), alternating batch by batch; the tracer
		// is started and stopped between them, untimed. With graphLevel the
		// tracer is the whole-graph one: one graph-launch record a replay.
		// Node by node, the old way (each replay launched alone and flushed)
		// is timed with the traced batch.
		be := gpuBackend(b)
		defer openSession(b, be, chains(nstreams, 1, dag.Spin, 10, false)).Close()
		raw, err := newRawLoop(be, nstreams, dag.Normal, dag.Spin, 10)
		require.NoError(b, err)
		defer raw.close()
		rg, err := newRawGraph(raw, rounds)
		require.NoError(b, err)
		defer rg.close()
		untraced := func() error { return rg.launches(replays) }
		// Before CUPTI is ever enabled in the process.
		pristine := measure(b, []loop{{name: "pristine", f: untraced}})["pristine"]

		candidates := cuptiCandidates(os.Getenv("DAGRUN_CUPTI"))
		start := newActivityTracer
		if graphLevel {
			start = newGraphLevelTracer
		}
		var tr *activityTracer
		var next int64 // the next replay marker
		perReplay := map[int64]int{}
		var dropped, lost uint64
		var stats tracerStats
		var first int64
		// The graph the traced batches launch. A whole-graph tracer times
		// only graphs instantiated while it is on (a session's tracer starts
		// at Open, before its capture; launching a graph instantiated before
		// crashed in CUPTI on the H100), so with graphLevel each traced batch
		// gets a graph instantiated after its tracer started, untimed.
		traced := rg
		launch := func() error {
			first = next
			next += replays
			return traced.markedLaunches(tr, replays, first)
		}
		want := activityKernel
		if graphLevel {
			want = activityGraphLaunch
		}
		read := func() error {
			each := nstreams * rounds // records a replay
			if graphLevel {
				each = 1
			}
			recs, err := takeRecords(tr, want, replays*each)
			clear(perReplay)
			for _, r := range recs {
				if r.Kind == want && r.Replay >= first && r.Replay < first+replays {
					perReplay[r.Replay-first]++
				}
			}
			return err
		}
		tracedEach := func() error {
			for range replays {
				if err := rg.markedLaunches(tr, 1, next); err != nil {
					return err
				}
				next++
				if _, err := tr.flush(); err != nil {
					return err
				}
			}
			return nil
		}
		var tu, te []time.Duration
		var tt, warm split
		for i := range 3 + b.N {
			u := timeIt(b, untraced)
			t, err := start(candidates)
			if err != nil {
				requireGPU(b, "no CUPTI: %v", err)
			}
			tr = t
			if graphLevel {
				traced, err = newRawGraph(raw, rounds)
				require.NoError(b, err)
			}
			timeSplit(b, &warm, launch, read) // the first replays after enabling CUPTI, untimed
			if i >= 3 {
				timeSplit(b, &tt, launch, read)
			} else {
				timeSplit(b, &warm, launch, read)
			}
			var e time.Duration
			if !graphLevel {
				e = timeIt(b, tracedEach)
			}
			dropped += tr.cuptiDropped()
			lost += tr.lost()
			stats = tr.stats()
			require.NoError(b, tr.close())
			tr = nil
			if traced != rg {
				traced.close()
				traced = rg
			}
			if i >= 3 {
				tu, te = append(tu, u), append(te, e)
			}
		}
		what := "a record per replayed kernel"
		per := nstreams * rounds
		if graphLevel {
			what, per = "one graph-launch record per launch", 1
		}
		require.Len(b, perReplay, replays, "every replay of the last traced batch has its records")
		for r, n := range perReplay {
			require.Equal(b, per, n, "replay %d: %s", r, what)
		}
		off := median(tu)
		report(b, off, tt)
		b.ReportMetric(us(pristine), "pristine-replay-us")
		b.ReportMetric(100*float64(median(tt.sync)-pristine)/float64(pristine), "tracing-vs-pristine-%")
		if !graphLevel {
			b.ReportMetric(100*float64(median(te)-off)/float64(off), "per-replay-flush-%")
		}
		b.ReportMetric(float64(dropped), "dropped")
		b.ReportMetric(float64(lost), "lost")
		b.Logf("%d replays a batch, %d kernels a replay, %s; medians over %d batches: pristine %v, untraced %v, traced to Sync %v, "+
			"reading the records %v, traced and flushed one by one %v; last tracer's sink: %v",
			replays, nstreams*rounds, what, len(tu), pristine, off, median(tt.sync), median(tt.read), median(te), stats)
	}
	b.Run("C-replay", func(b *testing.B) { rawReplays(b, false) })
	b.Run("C-replay-whole", func(b *testing.B) { rawReplays(b, true) })

	sessionReplays := func(b *testing.B, source string) {
		// Through executor sessions: workload C planned on 8 streams,
		// captured, and replayed 50 times back to back with one Sync, by a
		// session with timing off and by one timed by source (its spans
		// read per replay with Graph.ReplaySpans), alternating batch by
		// batch. The traced session is opened and captured before each of
		// its batches and closed after it, untimed: CUPTI would trace the
		// other session's replays too while it is open.
		const nchains, length = nstreams, rounds
		p, be, off := chainsOn(b, dag.Spin, 10)
		ctx := context.Background()
		offGraph, err := off.Capture(ctx)
		require.NoError(b, err)
		batch := func(g *executor.Graph) error {
			for range replays {
				if err := g.Launch(ctx); err != nil {
					return err
				}
			}
			return g.Sync(ctx)
		}
		var reps []executor.ReplaySpans
		var dropped uint64
		var why string
		var tu []time.Duration
		var tt split
		for i := range 3 + b.N {
			u := timeIt(b, func() error { return batch(offGraph) })
			s, err := executor.Open(ctx, be, p, executor.WithTiming(), executor.WithTimingSource(source))
			require.NoError(b, err)
			src, w, _ := s.TimingSource()
			if src != source {
				s.Close()
				requireGPU(b, "%s timing not used: %s", source, w)
			}
			why = w
			g, err := s.Capture(ctx)
			require.NoError(b, err)
			g.Spans()                    // what the capture left
			require.NoError(b, batch(g)) // the first replays after enabling CUPTI, untimed
			_, err = g.ReplaySpans()
			require.NoError(b, err)
			var st split
			timeSplit(b, &st, func() error { return batch(g) }, func() error {
				var err error
				reps, err = g.ReplaySpans()
				return err
			})
			_, _, d := s.TimingSource()
			dropped += d
			require.NoError(b, s.Close())
			if i >= 3 {
				tu = append(tu, u)
				tt.sync, tt.read = append(tt.sync, st.sync...), append(tt.read, st.read...)
			}
		}
		require.Len(b, reps, replays, "every replay of the last traced batch has its spans")
		for _, r := range reps {
			if source == TimingCUPTIGraph {
				require.True(b, r.Whole, "replay %d is timed whole", r.Launch)
				require.Less(b, r.Start, r.End, "replay %d", r.Launch)
				continue
			}
			require.Len(b, r.Spans, nchains*length, "replay %d: a span per op", r.Launch)
		}
		u := median(tu)
		report(b, u, tt)
		b.ReportMetric(float64(dropped), "dropped")
		b.Logf("%d replays a batch of %d ops, timed by %s; medians over %d batches: untraced %v, traced to Sync %v, ReplaySpans %v; timing: %s",
			replays, nchains*length, source, len(tu), u, median(tt.sync), median(tt.read), why)
	}
	b.Run("C-replay-session", func(b *testing.B) { sessionReplays(b, TimingCUPTI) })
	b.Run("C-replay-session-whole", func(b *testing.B) { sessionReplays(b, TimingCUPTIGraph) })
}

// BenchmarkCUPTIReplayRecords is the host's processing of one traced batch
// of C-replay without a GPU: 50 replays of 800 kernel records (8 streams x
// 100 ops), each named by its launch's marker and by the clone of a captured
// node, resolved (resolveRecordsCached) and gathered into spans (spans),
// as Session.ReplaySpans does after the flush. Reported per replay.
func BenchmarkCUPTIReplayRecords(b *testing.B) {
	const nstreams, rounds, replays = 8, 100, 50
	nops := nstreams * rounds
	clones, nodeOps := map[uint64]uint64{}, map[uint64]int64{}
	for op := range nops {
		clones[uint64(100000+op)] = uint64(1 + op)
		nodeOps[uint64(1+op)] = int64(op)
	}
	in := make([]activityRecord, 0, replays*(nops+1))
	for r := range replays {
		corr := uint32(1000 + r)
		in = append(in, activityRecord{Kind: activityExternal, Correlation: corr, Op: replayMarker + int64(r)})
		for op := range nops {
			start := uint64(1_000_000 + r*1_100_000 + (op/nstreams)*11_000)
			in = append(in, activityRecord{Kind: activityKernel, Correlation: corr, GraphNodeID: uint64(100000 + op),
				Start: start, End: start + 10_000})
		}
	}
	c := &cuptiTiming{origin: 1}
	for op := range nops {
		c.setStream(op, op%nstreams)
	}
	recs := make([]activityRecord, len(in))
	resolved := map[uint64]resolvedNode{}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		copy(recs, in)
		got := resolveRecordsCached(recs, nil, newCorrelations(), clones, map[uint64]uint64{}, nodeOps, resolved)
		n = 0
		c.spans(got, max(8*len(got), 1<<16), func(replay, op, stream int, start, end time.Duration) { n++ })
	}
	require.Equal(b, replays*nops, n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/replays/1e3, "us/replay")
}

// BenchmarkCUPTIEagerRecords is the host's processing of a traced eager
// run of workload E without a GPU: 800 kernel records, each named by the
// driver callback's link and by an external correlation record, resolved,
// checked for completeness and gathered into spans, as Session.Spans does
// after the flush. Reported per op.
func BenchmarkCUPTIEagerRecords(b *testing.B) {
	const nops, nstreams = 800, 8
	in := make([]activityRecord, 0, 2*nops)
	links := make([]link, 0, nops)
	for op := range nops {
		corr := uint32(5000 + 3*op) // a record and a wait between launches
		start := uint64(1_000_000 + op*1000)
		in = append(in, activityRecord{Kind: activityExternal, Correlation: corr, Op: int64(op), Replay: -1},
			activityRecord{Kind: activityKernel, Correlation: corr, Start: start, End: start + 900, Replay: -1})
		links = append(links, link{corr: corr, id: int64(op)})
	}
	tr := &activityTracer{external: newCorrelations()}
	c := &cuptiTiming{tr: tr, origin: 1}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		c.ops = c.ops[:0]
		for op := range nops {
			c.ops = append(c.ops, cuptiOp{op: op, stream: op % nstreams, expect: true})
			c.setStream(op, op%nstreams)
		}
		tr.recs = append(tr.recs[:0], in...)
		tr.linkBuf = append(tr.linkBuf[:0], links...)
		got := tr.resolvePending()
		if !c.complete(got) {
			b.Fatal("the run's records are all there")
		}
		n = 0
		c.spans(got, max(8*len(got), 1<<16), func(replay, op, stream int, start, end time.Duration) { n++ })
	}
	require.Equal(b, nops, n)
	require.Zero(b, tr.external.pending())
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/nops, "ns/op")
}
