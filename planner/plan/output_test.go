package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteText(t *testing.T) {
	p := plannertest.New(t, plannertest.Fixture(t, "pipeline"), planner.Streams(2))
	var buf bytes.Buffer
	require.NoError(t, p.WriteText(&buf))
	text := buf.String()
	for _, want := range []string{
		"stream dev0.normal.h2d (device 0, priority normal, h2d)\n  copy h2d0 (256 B h2d, in[0:256] -> d0)\n  record e0\n",
		"stream dev0.normal.compute0 (device 0, priority normal, compute)\n  wait e0 (from dev0.normal.h2d after op h2d0)\n  launch scale0 [scale grid 1x1x1 block 32x1x1]\n",
		"ops                 12\n",
		"streams             3\n  dev0 normal   1 compute, 1 h2d, 1 d2h\n",
		"cross-stream edges  ",
		"waits inserted      ",
		"critical path       ",
		"(makespan / critical path = ",
	} {
		assert.Contains(t, text, want)
	}
	// Every stream's instructions appear in order, one line each.
	for s, str := range p.Streams {
		block := text[strings.Index(text, "stream "+str.Name+" "):]
		lines := strings.Split(block, "\n")[1:]
		for i := range p.StreamSteps(s) {
			assert.True(t, strings.HasPrefix(lines[i], "  "), "line %q of %s", lines[i], str.Name)
		}
	}
}

func TestWriteTextOps(t *testing.T) {
	g := plannertest.Build(t, func(b *dag.Builder) {
		tmp := b.Buffer("tmp", 3<<20, dag.Temporary())
		host := b.Buffer("host", 3<<20, dag.PinnedHost())
		b.Fill(tmp.All(), 1.5, dag.Name("init"))
		b.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), tmp, 2.0, dag.Name("double"))
		b.Copy(host.All(), tmp.All(), dag.Name("down"))
		b.Copy(tmp.Slice(1024, 512), host.Slice(0, 512), dag.Name("part"))
		b.Launch(dag.Scale, dag.Grid1(2), dag.Grid1(32), tmp, 0.25, dag.Name("small")).Launch.Shared = 1536
		b.Host(func(ctx context.Context, mem [][]byte) error { return nil }, dag.In(host.All()), dag.Name("check"))
	})
	p := plannertest.New(t, g)
	var buf bytes.Buffer
	require.NoError(t, p.WriteText(&buf))
	for _, want := range []string{
		"  alloc tmp (3.0 MiB)\n",
		"  fill init (tmp = 1.5)\n",
		"  launch double [scale grid 64x1x1 block 256x1x1]\n",
		"  copy down (3.0 MiB d2h, tmp -> host)\n",
		"  copy part (512 B h2d, host[0:512] -> tmp[1024:1536])\n",
		"  launch small [scale grid 2x1x1 block 32x1x1 shared 1.5 KiB]\n",
		"  host check\n",
		"  free tmp (3.0 MiB)\n",
	} {
		assert.Contains(t, buf.String(), want)
	}
}

func TestMarshalJSON(t *testing.T) {
	p := plannertest.New(t, plannertest.Fixture(t, "fanout8"), planner.Streams(3))
	data, err := json.Marshal(p)
	require.NoError(t, err)
	var got struct {
		Streams []struct {
			ID       int    `json:"id"`
			Name     string `json:"name"`
			Device   int    `json:"device"`
			Priority int    `json:"priority"`
			Kind     string `json:"kind"`
		} `json:"streams"`
		Steps []struct {
			Kind   string `json:"kind"`
			Stream int    `json:"stream"`
			Op     string `json:"op"`
			Event  *int   `json:"event"`
			Early  bool   `json:"early"`
		} `json:"steps"`
		Events []struct {
			ID      int    `json:"id"`
			Stream  int    `json:"stream"`
			AfterOp string `json:"after_op"`
		} `json:"events"`
		Stats  map[string]any `json:"stats"`
		Memory map[string]any `json:"memory"`
		Passes []struct {
			Name    string `json:"name"`
			Scope   string `json:"scope"`
			Runs    int    `json:"runs"`
			TookNS  int64  `json:"took_ns"`
			Summary string `json:"summary"`
		} `json:"passes"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&got))

	require.Len(t, got.Streams, len(p.Streams))
	assert.Equal(t, "dev0.normal.compute0", got.Streams[0].Name)
	assert.Equal(t, "compute", got.Streams[0].Kind)
	require.Len(t, got.Steps, len(p.Steps))
	for i, st := range p.Steps {
		assert.Equal(t, st.Kind.String(), got.Steps[i].Kind)
		assert.Equal(t, p.Graph.Ops[st.Op].Name, got.Steps[i].Op)
		assert.Equal(t, st.Kind == planner.Run && p.IsEarly(int(st.Op)), got.Steps[i].Early)
		if st.Kind == planner.Run {
			assert.Nil(t, got.Steps[i].Event)
		} else {
			require.NotNil(t, got.Steps[i].Event)
			assert.Equal(t, int(st.Event), *got.Steps[i].Event)
		}
		if st.Kind == planner.Record {
			assert.Equal(t, p.Graph.Ops[st.Op].Name, got.Events[st.Event].AfterOp)
			assert.Equal(t, int(st.Stream), got.Events[st.Event].Stream)
		}
	}
	require.Len(t, got.Events, p.Events)
	want := map[string]any{
		"ops": float64(p.Stats.Ops), "streams": float64(p.Stats.Streams), "cross_edges": float64(p.Stats.CrossEdges),
		"waits": float64(p.Stats.Waits), "makespan_ns": float64(p.Stats.Makespan), "critical_path_ns": float64(p.Stats.CriticalPath),
		"mode": "eager", "strategy": "list",
	}
	if n := p.EarlyOps(); n > 0 {
		want["early_edges"] = float64(n)
	}
	assert.Equal(t, want, got.Stats)
	require.Len(t, got.Passes, len(p.Passes))
	for i, r := range p.Passes {
		assert.Equal(t, r.Name, got.Passes[i].Name)
		assert.Equal(t, r.Scope.String(), got.Passes[i].Scope)
		assert.Equal(t, r.Runs, got.Passes[i].Runs)
		assert.Equal(t, int64(r.Took), got.Passes[i].TookNS)
		assert.Equal(t, r.Summary, got.Passes[i].Summary)
	}
}
