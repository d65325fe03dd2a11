package perf

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestSignatureRulesCoverKinds(t *testing.T) {
	for _, k := range dag.OpKinds() {
		_, ok := signatureRules[k]
		assert.True(t, ok, "op kind %s has no perf-model signature rule: add one to signatureRules", k)
	}
	assert.Len(t, signatureRules, len(dag.OpKinds()), "a rule for a kind dag does not define")
}

var fuzzDevice = DeviceKey{Name: "NVIDIA H100 80GB HBM3", SMs: 132, Driver: 13000}

// FuzzPerfModel feeds the loader arbitrary bytes: it must never panic,
// always return a model, and whatever it accepts must save and load back
// to the same file.
func FuzzPerfModel(f *testing.F) {
	g := dag.New()
	x := g.Buffer("x", 1<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	h := g.Buffer("h", 1<<20, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0)
	g.Copy(h.All(), x.All())
	g.Copy(x.Slice(0, 4096), h.Slice(0, 4096))
	graph, err := g.Build()
	require.NoError(f, err)
	m := NewPerfModel(fuzzDevice, nil)
	var samples []OpSample
	for i, op := range graph.Ops {
		samples = append(samples, OpSample{Op: op, Duration: time.Duration(1000 * (1 + 7*i))})
	}
	require.NoError(f, m.Update(samples))
	require.NoError(f, m.ObserveOverhead(OverheadWait, 420))
	require.NoError(f, m.ObserveOverheadWeighted(OverheadStart, 48358, 0.025134160307548205))
	good, err := m.MarshalJSON()
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"format":"dagrun-perf-model","version":2}`))
	f.Add([]byte(`{"format":"dagrun-perf-model","version":0,"device":{}}`))
	f.Add([]byte(`{"format":"dagrun-perf-model","version":2,"device":{"name":"NVIDIA H100 80GB HBM3","sms":132,"driver":13000},"ops":[{"signature":"a","count":1,"mean_ns":-1}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parsePerfModel(data, "fuzz.json", fuzzDevice, nil)
		require.NotNil(t, m)
		if err != nil {
			var pe *PerfModelError
			require.ErrorAs(t, err, &pe)
			assert.Zero(t, m.Len())
			return
		}
		out, err := m.MarshalJSON()
		require.NoError(t, err)
		back, err := parsePerfModel(out, "fuzz.json", fuzzDevice, nil)
		require.NoError(t, err, "%s", out)
		again, err := back.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(out), string(again))
		// What it accepted takes more measurements, weighted or not, and
		// stays a model it accepts.
		for _, name := range slices.Sorted(maps.Keys(back.overheads)) {
			require.NoError(t, back.ObserveOverheadWeighted(name, 12345, 0.3))
			require.NoError(t, back.ObserveOverhead(name, 0))
		}
		out, err = back.MarshalJSON()
		require.NoError(t, err)
		_, err = parsePerfModel(out, "fuzz.json", fuzzDevice, nil)
		require.NoError(t, err, "%s", out)
	})
}

func TestSaveLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	m := NewPerfModel(fuzzDevice, nil)
	require.NoError(t, m.ObserveOverhead(OverheadRecord, 300))
	require.NoError(t, m.Save(path))
	require.NoError(t, m.Save(path)) // over an existing file
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "m.json", entries[0].Name())
	// A folder that cannot be written: an error, and the old file stays.
	require.Error(t, m.Save(filepath.Join(dir, "missing", "m.json")))
}
