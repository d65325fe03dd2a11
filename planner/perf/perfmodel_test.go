package perf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

var h100 = perf.DeviceKey{Name: "NVIDIA H100 80GB HBM3", SMs: 132, Driver: 13000}

// perfOps builds one graph holding an op of every kind and shape the perf
// model tests use, by name.
func perfOps(t testing.TB) map[string]*dag.Op {
	g := dag.New()
	x := g.Buffer("x", 4<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	y := g.Buffer("y", 4<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	z := g.Buffer("z", 4<<20, dag.OnDevice(1), dag.Of(dag.F32), dag.Zeros())
	pin := g.Buffer("pin", 4<<20, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	page := g.Buffer("page", 4<<20, dag.PageableHost(), dag.Of(dag.F32), dag.Zeros())
	tmp := g.Buffer("tmp", 1<<16, dag.OnDevice(0), dag.Temporary())
	ops := map[string]*dag.Op{
		"spin10":       g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0),
		"spin10 again": g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0),
		"spin50":       g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 50.0),
		"spin10 wide":  g.Launch(dag.Spin, dag.Grid1(2), dag.Grid1(32), 10.0),
		"scale":        g.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), x, float32(2)),
		"scale half":   g.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), x.Slice(0, 2<<20), float32(2)),
		"h2d 1M":       g.Copy(x.Slice(0, 1<<20), pin.Slice(0, 1<<20)),
		"h2d 4M":       g.Copy(x.All(), pin.All()),
		"h2d 2M":       g.Copy(x.Slice(0, 2<<20), pin.Slice(0, 2<<20)),
		"h2d page 1M":  g.Copy(x.Slice(0, 1<<20), page.Slice(0, 1<<20)),
		"d2h 1M":       g.Copy(pin.Slice(0, 1<<20), y.Slice(0, 1<<20)),
		"d2d 1M":       g.Copy(y.Slice(0, 1<<20), x.Slice(0, 1<<20)),
		"p2p 1M":       g.Copy(z.Slice(0, 1<<20), x.Slice(0, 1<<20)),
		"fill f32":     g.Fill(y.All(), 1),
		"use tmp":      g.Copy(tmp.All(), x.Slice(0, 1<<16)),
	}
	ops["hosted"] = g.Host(func(ctx context.Context, mem [][]byte) error { return nil }, dag.In(pin.Slice(0, 64)))
	graph, err := g.Build()
	require.NoError(t, err)
	for _, op := range graph.Ops {
		switch op.Kind {
		case dag.Alloc:
			ops["alloc"] = op
		case dag.Free:
			ops["free"] = op
		}
	}
	require.Contains(t, ops, "alloc")
	return ops
}

func TestSignature(t *testing.T) {
	ops := perfOps(t)
	sig := func(name string) string {
		s, err := perf.Signature(ops[name])
		require.NoError(t, err, name)
		return s
	}
	same := [][2]string{{"spin10", "spin10 again"}}
	differ := [][2]string{
		{"spin10", "spin50"},      // scalar arguments
		{"spin10", "spin10 wide"}, // launch shape
		{"scale", "scale half"},   // bytes touched
		{"h2d 1M", "h2d 4M"},      // copy size
		{"h2d 1M", "h2d page 1M"}, // pinned against pageable
		{"h2d 1M", "d2h 1M"},      // direction
		{"d2d 1M", "p2p 1M"},      // one device against two
		{"alloc", "free"},
	}
	for _, p := range same {
		assert.Equal(t, sig(p[0]), sig(p[1]), "%s and %s", p[0], p[1])
	}
	for _, p := range differ {
		assert.NotEqual(t, sig(p[0]), sig(p[1]), "%s and %s", p[0], p[1])
	}
	// Another kernel source under the same name is another signature.
	g := dag.New()
	k1 := &dag.Kernel{Name: "k", Source: dag.CUDAC, Code: `extern "C" __global__ void k() {}`}
	k2 := &dag.Kernel{Name: "k", Source: dag.CUDAC, Code: `extern "C" __global__ void k() { __nanosleep(100); }`}
	a := &dag.Op{Name: "a", Kind: dag.Launch, Launch: &dag.LaunchSpec{Kernel: k1, Grid: dag.Grid1(1), Block: dag.Grid1(1)}}
	b := &dag.Op{Name: "b", Kind: dag.Launch, Launch: &dag.LaunchSpec{Kernel: k2, Grid: dag.Grid1(1), Block: dag.Grid1(1)}}
	_ = g
	sa, err := perf.Signature(a)
	require.NoError(t, err)
	sb, err := perf.Signature(b)
	require.NoError(t, err)
	assert.NotEqual(t, sa, sb)

	for _, bad := range []*dag.Op{
		{Name: "no kernel", Kind: dag.Launch},
		{Name: "half copy", Kind: dag.Copy},
		{Name: "strange", Kind: dag.OpKind(200)},
	} {
		_, err := perf.Signature(bad)
		assert.ErrorContains(t, err, bad.Name)
	}
}

func TestPerfStatsWelford(t *testing.T) {
	xs := []float64{5, 9, 3, 3, 12.5, 7, 1e6, 4}
	var s perf.PerfStats
	for _, x := range xs {
		s.Add(x)
	}
	mean, variance := stat.MeanVariance(xs, nil)
	assert.InDelta(t, mean, s.MeanNs, 1e-6)
	assert.Equal(t, time.Duration(math.Round(math.Sqrt(variance))), s.Std())
	assert.Equal(t, int64(len(xs)), s.Count)
	assert.Equal(t, 3.0, s.MinNs)
	assert.Equal(t, 1e6, s.MaxNs)
	var one perf.PerfStats
	one.Add(42)
	assert.Zero(t, one.Std())
	assert.Equal(t, 42*time.Nanosecond, one.Mean())
}

// Weighted measurements: the mean and spread are the weighted ones, and
// measurements Added before (each of weight 1, with no weight stored, as
// in files written before weights) keep theirs.
func TestPerfStatsWeighted(t *testing.T) {
	xs := []float64{5, 9, 3, 3, 12.5, 7, 1e6, 4}
	ws := []float64{1, 1, 1, 0.5, 0.25, 1, 0.001, 0.75}
	var s perf.PerfStats
	for i, x := range xs {
		if ws[i] == 1 && s.Weight == 0 {
			s.Add(x) // the first ones unweighted, as an older file holds them
			continue
		}
		s.AddWeighted(x, ws[i])
	}
	mean := stat.Mean(xs, ws)
	var m2 float64
	for i, x := range xs {
		m2 += ws[i] * (x - mean) * (x - mean)
	}
	assert.InDelta(t, mean, s.MeanNs, 1e-9*mean)
	assert.InDelta(t, m2, s.M2, 1e-9*m2)
	assert.InDelta(t, floats.Sum(ws), s.Weight, 1e-12)
	assert.Equal(t, int64(len(xs)), s.Count)
	assert.Equal(t, 3.0, s.MinNs)
	assert.Equal(t, 1e6, s.MaxNs)
	// The outlier of weight 0.001 moves the mean by about a thousandth of
	// itself: a tenth of what it would unweighted.
	assert.Less(t, s.MeanNs, 1e6/float64(len(xs))/10)

	m := perf.NewPerfModel(h100, nil)
	for _, w := range []float64{0, -1, 1.5, math.NaN(), math.Inf(1)} {
		assert.Error(t, m.ObserveOverheadWeighted(perf.OverheadStart, time.Microsecond, w), "weight %v", w)
	}
	require.NoError(t, m.ObserveOverheadWeighted(perf.OverheadStart, 10*time.Microsecond, 1))
	require.NoError(t, m.ObserveOverheadWeighted(perf.OverheadStart, 1010*time.Microsecond, 0.01))
	d, ok := m.Overhead(perf.OverheadStart)
	require.True(t, ok)
	assert.Equal(t, 19901*time.Nanosecond, d) // (10 + 0.01 * 1010) / 1.01 us
}

func TestPerfModelDuration(t *testing.T) {
	ops := perfOps(t)
	m := perf.NewPerfModel(h100, nil)
	def := perf.DefaultCost()
	all := make([]*dag.Op, 0, len(ops))
	for _, op := range ops {
		all = append(all, op)
		assert.Equal(t, def.Duration(op), m.Duration(op), "op %s before any measurement", op.Name)
	}
	assert.Zero(t, m.Covered(all))

	ops["spin10"].Cost = 99 * time.Microsecond // a hint: measurements win over it
	require.NoError(t, m.Update([]perf.OpSample{
		{Op: ops["spin10"], Duration: 11 * time.Microsecond},
		{Op: ops["spin10 again"], Duration: 13 * time.Microsecond},
		{Op: ops["spin50"], Duration: 51 * time.Microsecond},
		{Op: ops["alloc"], Duration: 700 * time.Nanosecond},
	}))
	assert.Equal(t, 12*time.Microsecond, m.Duration(ops["spin10"]))
	assert.Equal(t, 12*time.Microsecond, m.Duration(ops["spin10 again"]))
	assert.Equal(t, 51*time.Microsecond, m.Duration(ops["spin50"]))
	assert.Equal(t, def.Duration(ops["spin10 wide"]), m.Duration(ops["spin10 wide"]), "not measured")
	assert.Equal(t, 700*time.Nanosecond, m.Duration(ops["alloc"]))
	assert.Equal(t, 4, m.Covered(all))
	st, ok := m.OpStats(ops["spin10"])
	require.True(t, ok)
	assert.Equal(t, int64(2), st.Count)
	assert.Equal(t, time.Duration(math.Round(math.Sqrt(2)*1000)), st.Std())

	_, ok = m.Overhead(perf.OverheadWait)
	assert.False(t, ok)
	require.NoError(t, m.ObserveOverhead(perf.OverheadWait, 400))
	require.NoError(t, m.ObserveOverhead(perf.OverheadWait, 440))
	require.NoError(t, m.ObserveOverhead(perf.SubmitOverhead(dag.Launch), 2500))
	d, ok := m.Overhead(perf.OverheadWait)
	require.True(t, ok)
	assert.Equal(t, 420*time.Nanosecond, d)
	d, ok = m.Overhead(perf.SubmitOverhead(dag.Launch))
	require.True(t, ok)
	assert.Equal(t, 2500*time.Nanosecond, d)
	assert.Error(t, m.ObserveOverhead(perf.OverheadRecord, -1))
	assert.Error(t, m.ObserveOverhead("", 1))
}

func TestPerfModelCopyFit(t *testing.T) {
	ops := perfOps(t)
	const latency, bandwidth = 10e3, 25e9 // ns, bytes per second
	copyTime := func(op *dag.Op) time.Duration {
		return time.Duration(latency + float64(op.Bytes())/bandwidth*1e9)
	}
	m := perf.NewPerfModel(h100, nil)
	require.NoError(t, m.Update([]perf.OpSample{{Op: ops["h2d 1M"], Duration: copyTime(ops["h2d 1M"])}}))
	_, _, ok := m.CopyFit("h2d-pinned")
	assert.False(t, ok, "one size fits no bandwidth")
	_, ok = m.Measured(ops["h2d 2M"])
	assert.False(t, ok)

	require.NoError(t, m.Update([]perf.OpSample{{Op: ops["h2d 4M"], Duration: copyTime(ops["h2d 4M"])}}))
	lat, bw, ok := m.CopyFit("h2d-pinned")
	require.True(t, ok)
	assert.InDelta(t, latency, float64(lat), 10)
	assert.InEpsilon(t, bandwidth, bw, 1e-3)
	got, ok := m.Measured(ops["h2d 2M"])
	require.True(t, ok, "interpolated from the fit")
	assert.InEpsilon(t, float64(copyTime(ops["h2d 2M"])), float64(got), 1e-3)
	// Other directions have their own fits.
	_, ok = m.Measured(ops["h2d page 1M"])
	assert.False(t, ok)
	_, ok = m.Measured(ops["d2h 1M"])
	assert.False(t, ok)
	// Copies that get faster with size fit no bandwidth.
	m2 := perf.NewPerfModel(h100, nil)
	require.NoError(t, m2.Update([]perf.OpSample{
		{Op: ops["h2d 1M"], Duration: 100 * time.Microsecond},
		{Op: ops["h2d 4M"], Duration: 50 * time.Microsecond},
	}))
	_, ok = m2.Measured(ops["h2d 2M"])
	assert.False(t, ok)
}

func TestPerfModelUpdateRejects(t *testing.T) {
	ops := perfOps(t)
	tests := []struct {
		name    string
		samples []perf.OpSample
		msg     string
	}{
		{"no op", []perf.OpSample{{Duration: 1}}, "sample 0 has no op"},
		{"negative", []perf.OpSample{{Op: ops["spin10"], Duration: time.Microsecond}, {Op: ops["spin50"], Duration: -1}},
			"op " + ops["spin50"].Name + ": duration -1ns"},
		{"too long", []perf.OpSample{{Op: ops["scale"], Duration: 2 * time.Hour}}, "2h0m0s"},
		{"no signature", []perf.OpSample{{Op: &dag.Op{Name: "odd", Kind: dag.Launch}, Duration: 1}}, "op odd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := perf.NewPerfModel(h100, nil)
			assert.ErrorContains(t, m.Update(tc.samples), tc.msg)
			assert.Zero(t, m.Len(), "a rejected update changes nothing")
		})
	}
}

func TestPerfModelSaveLoad(t *testing.T) {
	ops := perfOps(t)
	m := perf.NewPerfModel(h100, nil)
	var samples []perf.OpSample
	for _, op := range ops {
		d := time.Microsecond + time.Duration(op.Bytes()/10) // copies fit a bandwidth
		samples = append(samples, perf.OpSample{Op: op, Duration: d}, perf.OpSample{Op: op, Duration: d + 300})
	}
	require.NoError(t, m.Update(samples))
	require.NoError(t, m.ObserveOverhead(perf.OverheadRecord, 260))
	path := filepath.Join(t.TempDir(), "models.json")
	require.NoError(t, m.Save(path))

	back, err := perf.LoadPerfModel(path, h100, nil)
	require.NoError(t, err)
	assert.Equal(t, m.Len(), back.Len())
	for _, op := range ops {
		assert.Equal(t, m.Duration(op), back.Duration(op), op.Name)
		a, _ := m.OpStats(op)
		b, _ := back.OpStats(op)
		assert.Equal(t, a, b, op.Name)
	}
	d, ok := back.Overhead(perf.OverheadRecord)
	assert.True(t, ok)
	assert.Equal(t, 260*time.Nanosecond, d)
	lat, bw, ok := back.CopyFit("h2d-pinned")
	assert.True(t, ok, "fits are rebuilt on load")
	wl, wb, _ := m.CopyFit("h2d-pinned")
	assert.Equal(t, wl, lat)
	assert.InEpsilon(t, wb, bw, 1e-9)

	missing, err := perf.LoadPerfModel(filepath.Join(t.TempDir(), "none.json"), h100, nil)
	require.NoError(t, err, "a first run has no model yet")
	assert.Zero(t, missing.Len())
}

func TestLoadPerfModelProblems(t *testing.T) {
	dev := `"device":{"name":"NVIDIA H100 80GB HBM3","sms":132,"driver":13000}`
	stats := `"count":2,"mean_ns":1000,"m2":0,"min_ns":1000,"max_ns":1000`
	tests := []struct {
		name    string
		data    string
		problem perf.PerfModelProblem
		msg     string
	}{
		{"not JSON", `{"format":`, perf.PerfModelCorrupt, "is not a valid perf model"},
		{"not a model", `[1,2]`, perf.PerfModelCorrupt, "not a valid perf model"},
		{"another format", `{"format":"chrome-trace","version":2,` + dev + `}`, perf.PerfModelCorrupt, `format "chrome-trace"`},
		{"older version", `{"format":"dagrun-perf-model","version":0,` + dev + `}`, perf.PerfModelOldVersion, "version 0, this dagrun reads 2"},
		{"version 1 (host costs of traced runs)", `{"format":"dagrun-perf-model","version":1,` + dev + `,"ops":[],"overheads":[]}`, perf.PerfModelOldVersion, "version 1, this dagrun reads 2"},
		{"newer version", `{"format":"dagrun-perf-model","version":7,"device":{},"future":true}`, perf.PerfModelNewVersion, "newer dagrun"},
		{"another device", `{"format":"dagrun-perf-model","version":2,"device":{"name":"NVIDIA H100 80GB HBM3","sms":132,"mig":"1g.10gb","driver":13000}}`,
			perf.PerfModelOtherDevice, "MIG 1g.10gb"},
		{"another driver", `{"format":"dagrun-perf-model","version":2,"device":{"name":"NVIDIA H100 80GB HBM3","sms":132,"driver":12080}}`,
			perf.PerfModelOtherDevice, "driver 12080"},
		{"negative mean", `{"format":"dagrun-perf-model","version":2,` + dev + `,"ops":[{"signature":"a","kind":"launch","bytes":0,"count":1,"mean_ns":-5,"m2":0,"min_ns":-5,"max_ns":-5}]}`,
			perf.PerfModelCorrupt, "ops[0] (a)"},
		{"zero count", `{"format":"dagrun-perf-model","version":2,` + dev + `,"ops":[{"signature":"a","kind":"launch","bytes":0,"count":0,"mean_ns":1,"m2":0,"min_ns":1,"max_ns":1}]}`,
			perf.PerfModelCorrupt, "count 0"},
		{"mean outside min and max", `{"format":"dagrun-perf-model","version":2,` + dev + `,"ops":[{"signature":"a","kind":"launch","bytes":0,"count":2,"mean_ns":5,"m2":0,"min_ns":10,"max_ns":20}]}`,
			perf.PerfModelCorrupt, "not between"},
		{"duplicate signature", `{"format":"dagrun-perf-model","version":2,` + dev + `,"ops":[{"signature":"a","kind":"launch","bytes":0,` + stats + `},{"signature":"a","kind":"launch","bytes":0,` + stats + `}]}`,
			perf.PerfModelCorrupt, "appears twice"},
		{"no signature", `{"format":"dagrun-perf-model","version":2,` + dev + `,"ops":[{"kind":"launch","bytes":0,` + stats + `}]}`,
			perf.PerfModelCorrupt, "no signature"},
		{"unknown field", `{"format":"dagrun-perf-model","version":2,` + dev + `,"opz":[]}`, perf.PerfModelCorrupt, "opz"},
		{"trailing data", `{"format":"dagrun-perf-model","version":2,` + dev + `} {}`, perf.PerfModelCorrupt, "after top-level value"},
		{"huge number", `{"format":"dagrun-perf-model","version":2,` + dev + `,"overheads":[{"name":"wait","count":1,"mean_ns":1e400,"m2":0,"min_ns":1,"max_ns":1}]}`,
			perf.PerfModelCorrupt, "not a valid perf model"},
		{"implausible duration", `{"format":"dagrun-perf-model","version":2,` + dev + `,"overheads":[{"name":"wait","count":1,"mean_ns":1e15,"m2":0,"min_ns":1e15,"max_ns":1e15}]}`,
			perf.PerfModelCorrupt, "exceeds 1h0m0s"},
	}
	ops := perfOps(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "models.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o644))
			m, err := perf.LoadPerfModel(path, h100, nil)
			require.NotNil(t, m, "planning goes on")
			var pe *perf.PerfModelError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tc.problem, pe.Problem)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "planning with default costs")
			assert.Zero(t, m.Len())
			assert.Equal(t, perf.DefaultCost().Duration(ops["spin50"]), m.Duration(ops["spin50"]))
		})
	}
	t.Run("a folder", func(t *testing.T) {
		_, err := perf.LoadPerfModel(t.TempDir(), h100, nil)
		var pe *perf.PerfModelError
		require.ErrorAs(t, err, &pe)
	})
}

func TestRankPath(t *testing.T) {
	tests := []struct {
		path string
		rank int
		want string
	}{
		{"models.json", -1, "models.json"},
		{"models.json", 0, "models.rank0.json"},
		{"dir/models.json", 3, "dir/models.rank3.json"},
		{"models", 1, "models.rank1"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, perf.RankPath(tc.path, tc.rank), "%s %d", tc.path, tc.rank)
	}
}

// A perf model learns each op's duration from runs and then costs it for
// the planner; ops it has not measured keep the default estimate.
func ExamplePerfModel() {
	g := dag.New()
	x := g.Buffer("x", 1<<20, dag.OnDevice(0), dag.Zeros())
	spin := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0)
	fill := g.Fill(x.All(), 0)
	if _, err := g.Build(); err != nil {
		panic(err)
	}
	m := perf.NewPerfModel(perf.DeviceKey{Name: "cpu", SMs: 2}, nil)
	_ = m.Update([]perf.OpSample{{Op: spin, Duration: 11 * time.Microsecond}, {Op: spin, Duration: 12 * time.Microsecond}})
	fmt.Println(m.Duration(spin), m.Covered([]*dag.Op{spin, fill}), "of 2 ops measured")
	// Output: 11.5µs 1 of 2 ops measured
}

func TestPerfModelConcurrentDurations(t *testing.T) {
	ops := perfOps(t)
	m := perf.NewPerfModel(h100, nil)
	require.NoError(t, m.Update([]perf.OpSample{{Op: ops["scale"], Duration: 3 * time.Microsecond}}))
	done := make(chan time.Duration)
	for range 4 {
		go func() {
			var d time.Duration
			for range 100 {
				for _, op := range ops {
					d += m.Duration(op)
				}
			}
			done <- d
		}()
	}
	first := <-done
	for range 3 {
		assert.Equal(t, first, <-done)
	}
}

// Whatever the measurements and weights, the stats stay ones a file may
// hold: the H100 run that first weighed starts wrote a spread of -8.8e-9
// from one measurement of weight 0.025, and the next run refused the file.
func TestPerfStatsWeightedValid(t *testing.T) {
	var one perf.PerfStats
	one.AddWeighted(48358, 0.025134160307548205)
	assert.Equal(t, 48358.0, one.MeanNs)
	assert.Zero(t, one.M2)

	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(t.TempDir(), "m.json")
	for trial := range 2000 {
		m := perf.NewPerfModel(h100, nil)
		for range 1 + rng.IntN(6) {
			d := time.Duration(rng.Int64N(int64(10 * time.Millisecond)))
			if rng.IntN(3) == 0 {
				d = time.Duration(rng.IntN(3)) * 48358 // repeats: zero spread
			}
			w := rng.Float64()
			if w == 0 || rng.IntN(4) == 0 {
				w = 1
			}
			require.NoError(t, m.ObserveOverheadWeighted(perf.OverheadStart, d, w))
		}
		require.NoError(t, m.Save(path))
		_, err := perf.LoadPerfModel(path, h100, nil)
		require.NoError(t, err, "trial %d", trial)
	}
}

// A model that knows its world keeps a collective's durations per world
// size: an all-reduce among 2 ranks is not one among 8.
func TestPerfModelWorld(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 4096, dag.Of(dag.F32), dag.Zeros())
	g.AllReduce(x.All(), dag.Sum, dag.Name("ar"))
	graph, err := g.Build()
	require.NoError(t, err)
	ar := graph.Ops[len(graph.Ops)-1]
	require.True(t, ar.Kind.IsCollective())

	m := perf.NewPerfModel(h100, nil)
	m.World = 2
	require.NoError(t, m.Update([]perf.OpSample{{Op: ar, Duration: 20 * time.Microsecond}}))
	d, ok := m.Measured(ar)
	require.True(t, ok)
	assert.Equal(t, 20*time.Microsecond, d)
	m.World = 8
	_, ok = m.Measured(ar)
	assert.False(t, ok, "measured among 2 ranks, not 8")
	require.NoError(t, m.Update([]perf.OpSample{{Op: ar, Duration: 60 * time.Microsecond}}))
	d, _ = m.Measured(ar)
	assert.Equal(t, 60*time.Microsecond, d)
	m.World = 2
	d, _ = m.Measured(ar)
	assert.Equal(t, 20*time.Microsecond, d, "both kept in one model")
}

// A hostile or noisy model cannot make a plan's estimate wrap: two entries
// of one copy direction, 0 ns at 1 byte and 1 h at 2 bytes, fit 1 h a
// byte. Copies near the measured sizes saturate at the per-op cap; copies
// far beyond them are costed by the fallback, and Extrapolations names the
// entries.
func TestPerfModelHostileCopyFit(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 4<<20, dag.OnDevice(0), dag.Zeros())
	pin := g.Buffer("pin", 4<<20, dag.PinnedHost(), dag.Zeros())
	one := g.Copy(x.Slice(0, 1), pin.Slice(0, 1), dag.Name("one"))
	two := g.Copy(x.Slice(0, 2), pin.Slice(0, 2), dag.Name("two"))
	near := g.Copy(x.Slice(0, 20), pin.Slice(0, 20), dag.Name("near"))
	far := g.Copy(x.All(), pin.All(), dag.Name("far"))
	graph, err := g.Build()
	require.NoError(t, err)
	m := perf.NewPerfModel(h100, nil)
	require.NoError(t, m.Update([]perf.OpSample{{Op: one, Duration: 0}, {Op: two, Duration: time.Hour}}))

	d, ok := m.Measured(near)
	assert.True(t, ok)
	assert.Equal(t, time.Hour, d, "saturated at the per-op cap")
	_, ok = m.Measured(far)
	assert.False(t, ok, "4 MiB is far beyond the 1 to 2 bytes measured")
	assert.Equal(t, perf.DefaultCost().Duration(far), m.Duration(far))

	warns := m.Extrapolations(graph.Ops)
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0], "copy far of 4194304 bytes lies more than 16x outside the sizes the perf model measured")
	sigOne, _ := perf.Signature(one)
	sigTwo, _ := perf.Signature(two)
	assert.Contains(t, warns[0], fmt.Sprintf("(1 bytes, entry %q, to 2 bytes, entry %q)", sigOne, sigTwo))

	p, err := planner.New(graph, planner.Cost(m))
	require.NoError(t, err)
	assert.Positive(t, p.Stats.Makespan)
	assert.GreaterOrEqual(t, p.Stats.Makespan, time.Hour)
}
