package trace_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/trace"
)

// TestMemoryCounters checks the memory counter tracks of planned traces of
// the memory families: they start at the first Alloc, never go below zero
// or above the temporaries' sum, reach at least the largest temporary, end
// at zero (every temporary is freed), and survive WriteChrome and
// ReadChrome as "C" events named "memory dev0".
func TestMemoryCounters(t *testing.T) {
	for _, fam := range dagtest.Families() {
		for seed := range int64(4) {
			g := dagtest.Family(fam, 12, seed)
			p, err := planner.New(g, planner.Streams(1+int(seed)))
			require.NoError(t, err)
			tr := trace.FromPlan(p, nil)
			require.NotEmpty(t, tr.Counters, "%s/%d", fam, seed)
			var sum, largest, high int64
			for _, b := range g.Buffers {
				if b.Temporary {
					sum += b.Size
					largest = max(largest, b.Size)
				}
			}
			for i, c := range tr.Counters {
				require.Equal(t, 0, c.Memory)
				require.GreaterOrEqual(t, c.Bytes, int64(0))
				require.LessOrEqual(t, c.Bytes, sum)
				if i > 0 {
					require.Greater(t, c.At, tr.Counters[i-1].At)
				}
				high = max(high, c.Bytes)
			}
			require.GreaterOrEqual(t, high, largest)
			require.Zero(t, tr.Counters[len(tr.Counters)-1].Bytes)

			var buf bytes.Buffer
			require.NoError(t, tr.WriteChrome(&buf))
			require.Contains(t, buf.String(), `"name":"memory dev0","ph":"C"`)
			back, err := trace.ReadChrome(&buf)
			require.NoError(t, err)
			require.Equal(t, tr.Counters, back.Counters, "%s/%d", fam, seed)
		}
	}
}

// TestReadChromeCounters: ReadChrome keeps dagrun's memory counters,
// ignores counters of other names, and refuses a memory counter without a
// byte count, with a negative one, or at a time out of range (negative times are as good as slices').
func TestReadChromeCounters(t *testing.T) {
	head := `{"traceEvents":[
{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"s","stream":0,"stream_name":"s","device":0,"priority":0,"kind":"compute"}},
{"name":"f","ph":"X","ts":0,"dur":1,"pid":1,"tid":1,"args":{"op":"f","op_id":0,"kind":"fill","bytes":4}},
`
	tr, err := trace.ReadChrome(strings.NewReader(head + `{"name":"memory pinned","ph":"C","ts":2,"pid":0,"args":{"temporaries":512}},
{"name":"memory dev0","ph":"C","ts":1,"pid":1,"args":{"temporaries":0}},
{"name":"memory dev0","ph":"C","ts":0.5,"pid":1,"args":{"temporaries":256}},
{"name":"cpu load","ph":"C","ts":0,"pid":1,"args":{"load":-3}}]}`))
	require.NoError(t, err)
	require.Equal(t, []trace.Counter{{Memory: plan.PinnedMemory, At: 2000, Bytes: 512}, {Memory: 0, At: 500, Bytes: 256}, {Memory: 0, At: 1000, Bytes: 0}}, tr.Counters)
	for ev, want := range map[string]string{
		`{"name":"memory dev0","ph":"C","ts":0,"pid":1,"args":{"temporaries":-1}}`:    "at least 0",
		`{"name":"memory dev0","ph":"C","ts":0,"pid":1,"args":{}}`:                    "at least 0",
		`{"name":"memory dev0","ph":"C","ts":1e300,"pid":1,"args":{"temporaries":1}}`: "ts",
	} {
		_, err := trace.ReadChrome(strings.NewReader(head + ev + "]}"))
		require.ErrorContains(t, err, want, ev)
	}
}
