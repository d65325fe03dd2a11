package planner_test

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

func fixture(t *testing.T, name string) *dag.Graph {
	t.Helper()
	for _, f := range dagtest.Fixtures() {
		if f.Name == name {
			return f.Graph
		}
	}
	t.Fatalf("no fixture %s", name)
	return nil
}

// The pass log: New runs bodies, order, place, events, memory and early
// (and verify when asked), each once except the candidate passes, and each
// says what it did; the text lists them under "passes".
func TestPassLog(t *testing.T) {
	g := fixture(t, "fanout8")
	for _, tc := range []struct {
		opts  []planner.Option
		names []string
	}{
		{[]planner.Option{planner.Streams(3)}, []string{"fuse", "split", "bodies", "order", "place", "events", "gather", "memory", "early"}},
		{[]planner.Option{planner.Streams(3), planner.Verify()}, []string{"fuse", "split", "bodies", "order", "place", "events", "gather", "memory", "early", "verify"}},
		{[]planner.Option{planner.Streams(3), planner.Fuse(planner.FuseNone)}, []string{"split", "bodies", "order", "place", "events", "gather", "memory", "early"}},
		{[]planner.Option{planner.Streams(3), planner.Fuse(planner.FuseNone), planner.Split(planner.SplitNone), planner.Early(planner.EarlyNone)}, []string{"bodies", "order", "place", "events", "gather", "memory"}},
	} {
		p := mustPlan(t, g, tc.opts...)
		var names []string
		for _, r := range p.Passes {
			names = append(names, r.Name)
			assert.NotEmpty(t, r.Summary, r.Name)
			assert.Positive(t, r.Runs, r.Name)
		}
		assert.Equal(t, tc.names, names)
		o := slices.Index(names, "order")
		assert.Equal(t, p.Passes[o].Runs, p.Passes[o+1].Runs, "order and place run once per candidate")
		assert.Equal(t, p.Passes[o+1].Runs, p.Passes[o+2].Runs, "place and events run once per candidate")
		// The events pass's waits, less those the gather pass found
		// implied once it moved some up, are the plan's.
		var placed, dropped int
		_, err := fmt.Sscanf(p.Passes[o+2].Summary, "%d waits", &placed)
		require.NoError(t, err, p.Passes[o+2].Summary)
		if m := regexp.MustCompile(`(\d+) then implied by others dropped`).FindStringSubmatch(p.Passes[o+3].Summary); m != nil {
			dropped, _ = strconv.Atoi(m[1])
		}
		assert.Equal(t, p.Stats.Waits, placed-dropped, "%s; %s", p.Passes[o+2].Summary, p.Passes[o+3].Summary)
		var buf bytes.Buffer
		require.NoError(t, p.WritePasses(&buf))
		assert.Regexp(t, `(?m)^passes\n(  fuse +[\d.]+ \S+ +nothing fused\n)?(  split +[\d.]+ \S+ +nothing split\n)?  bodies +[\d.]+ \S+ +no loops or branches\n  order +[\d.]+ \S+ x\d+ +list placement: \d+ candidates planned, kept earliest start with 3 streams \(objective makespan\)\n`, buf.String())
		assert.Regexp(t, `(?m)^  events +[\d.]+ \S+( x\d+)? +\d+ waits, \d+ elided, \d+ events; estimated makespan`, buf.String())
	}
}
