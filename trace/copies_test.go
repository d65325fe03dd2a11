package trace_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

type peers bool

func (p peers) PeerAccess(from, to int) bool { return bool(p) || from == to }

// TestCopyPaths: every copy's slice says where it went (between devices:
// peer or via host, as the plan's topology has it) and what bandwidth it
// reached; the trace file keeps both, and the summary adds copies up by
// path.
func TestCopyPaths(t *testing.T) {
	for _, peer := range []bool{true, false} {
		b := dag.New()
		a := b.Buffer("a", 1<<20, dag.OnDevice(1), dag.Zeros())
		a0 := b.Buffer("a0", 1<<20, dag.OnDevice(0), dag.Zeros())
		c0 := b.Buffer("c0", 1<<20, dag.OnDevice(0), dag.Zeros())
		h := b.Buffer("h", 1<<20, dag.PinnedHost(), dag.Zeros())
		b.Copy(a0.All(), a.All(), dag.Name("peer"))
		b.Copy(c0.All(), a0.All(), dag.Name("local"))
		b.Copy(h.All(), c0.All(), dag.Name("down"))
		g, err := b.Build()
		require.NoError(t, err)
		p, err := planner.New(g, planner.OnTopology(peers(peer)))
		require.NoError(t, err)
		var spans []executor.Span
		for i := range g.Ops {
			start := time.Duration(i) * 100 * time.Microsecond
			spans = append(spans, executor.Span{Op: i, Stream: int(p.OpStream[i]), Start: start, End: start + 10*time.Microsecond})
		}
		tr := trace.FromRun(p, spans)
		how := "via host"
		if peer {
			how = "peer"
		}
		want := map[string]string{"peer": "dev1->dev0 " + how, "local": "dev0->dev0", "down": "dev0->pinned"}
		for _, s := range tr.Slices {
			assert.Equal(t, want[s.Name], s.Path, s.Name)
			assert.InDelta(t, 104.8576, s.GBps(), 1e-9, "1 MiB in 10 µs")
		}
		var buf bytes.Buffer
		require.NoError(t, tr.WriteChrome(&buf))
		assert.Contains(t, buf.String(), `"gb_per_s":104.858`)
		back, err := trace.ReadChrome(&buf)
		require.NoError(t, err)
		for _, s := range back.Slices {
			assert.Equal(t, want[s.Name], s.Path, "%s read back", s.Name)
		}
		copies := tr.Summarize().Copies
		require.Len(t, copies, 3)
		for _, c := range copies {
			assert.Equal(t, 1, c.Count, c.Path)
			assert.Equal(t, int64(1<<20), c.Bytes, c.Path)
		}
		var sum bytes.Buffer
		require.NoError(t, tr.WriteSummary(&sum))
		assert.Contains(t, sum.String(), "dev1->dev0 "+how)
	}
}
