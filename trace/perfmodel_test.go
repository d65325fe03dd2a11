package trace_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/trace"
)

func TestPerfSamples(t *testing.T) {
	g := dag.New()
	a := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0)
	c := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 50.0)
	graph, err := g.Build()
	require.NoError(t, err)
	us := time.Microsecond
	tests := []struct {
		name  string
		spans []executor.Span
		want  []time.Duration
		err   string
	}{
		{"two ops", []executor.Span{{Op: a.ID, Start: 5 * us, End: 16 * us}, {Op: c.ID, Start: 16 * us, End: 67 * us}},
			[]time.Duration{11 * us, 51 * us}, ""},
		{"none", nil, []time.Duration{}, ""},
		{"another graph's op", []executor.Span{{Op: 7}}, nil, "span 0 names op 7, and the graph has 2 ops"},
		{"negative op", []executor.Span{{Op: -1}}, nil, "names op -1"},
		{"backwards", []executor.Span{{Op: c.ID, Start: 9, End: 3}}, nil, "op " + c.Name + " ends"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trace.PerfSamples(graph, tc.spans)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			durs := []time.Duration{}
			for _, s := range got {
				durs = append(durs, s.Duration)
			}
			assert.Equal(t, tc.want, durs)
		})
	}

	// The samples teach a model that then costs the ops.
	spans := []executor.Span{{Op: a.ID, Start: 0, End: 11 * us}, {Op: a.ID, Start: 20 * us, End: 33 * us}}
	samples, err := trace.PerfSamples(graph, spans)
	require.NoError(t, err)
	m := perf.NewPerfModel(perf.DeviceKey{Name: "cpu", SMs: 2}, nil)
	require.NoError(t, m.Update(samples))
	assert.Equal(t, 12*us, m.Duration(a))
	assert.Equal(t, 1, m.Covered(graph.Ops))
}
