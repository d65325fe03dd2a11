package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// rawEvent is a trace event as any Trace Event Format reader sees it.
type rawEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  *int           `json:"pid"`
	Tid  *int           `json:"tid"`
	ID   *int           `json:"id"`
	Bp   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

// traces are the traces the Chrome tests write and read back.
func traces(t *testing.T) map[string]*trace.Trace {
	p := pipeline(t)
	return map[string]*trace.Trace{
		"run":      trace.FromRun(p, simulatedSpans(p, 3*time.Millisecond)),
		"plan":     trace.FromPlan(p, nil),
		"hand":     handMade(),
		"zero-dur": zeroDurations(),
		"whole":    wholeReplays(p),
	}
}

// wholeReplays is a trace of graph replays traced whole: no slices, the
// replays in its figures.
func wholeReplays(p *planner.Plan) *trace.Trace {
	tr := trace.FromRuns(p, nil)
	tr.Slices = nil // as ReadChrome reads a trace without slices
	tr.Figures.Timing, tr.Figures.WholeReplays = "cupti-graph", true
	tr.Figures.ReplayTiming = "device clock: CUPTI graph-trace records"
	tr.Figures.Replays = []trace.WholeReplay{{Run: 1, Start: 0, Dur: 1500 * time.Microsecond}, {Run: 2, Start: 1502 * time.Microsecond, Dur: 1498 * time.Microsecond}}
	return tr
}

func TestWriteChromeIsValidTraceEventJSON(t *testing.T) {
	for name, tr := range traces(t) {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tr.WriteChrome(&buf))
			var file struct {
				TraceEvents []rawEvent     `json:"traceEvents"`
				OtherData   map[string]any `json:"otherData"`
			}
			require.NoError(t, json.Unmarshal(buf.Bytes(), &file), buf.String())
			assert.Equal(t, "dagrun", file.OtherData["generator"])
			assert.EqualValues(t, tr.Figures.Waits, file.OtherData["waits"])

			type thread struct{ pid, tid int }
			processNames, threadNames := map[int]string{}, map[thread]string{}
			slices := map[thread][]rawEvent{}
			starts, finishes := map[int]rawEvent{}, map[int]rawEvent{}
			var xs int
			for _, ev := range file.TraceEvents {
				require.NotNil(t, ev.Pid, "event %q has a pid", ev.Name)
				require.NotNil(t, ev.Tid, "event %q has a tid", ev.Name)
				require.NotNil(t, ev.Ts, "event %q has a ts", ev.Name)
				th := thread{*ev.Pid, *ev.Tid}
				switch ev.Ph {
				case "M":
					switch ev.Name {
					case "process_name":
						processNames[*ev.Pid] = ev.Args["name"].(string)
					case "thread_name":
						threadNames[th] = ev.Args["name"].(string)
					case "thread_sort_index", "process_sort_index":
						assert.Contains(t, ev.Args, "sort_index")
					default:
						t.Errorf("unexpected metadata event %q", ev.Name)
					}
				case "X":
					xs++
					require.NotNil(t, ev.Dur, "X event %q has a dur", ev.Name)
					assert.GreaterOrEqual(t, *ev.Dur, 0.0)
					for _, k := range []string{"op", "kind", "bytes"} {
						assert.Contains(t, ev.Args, k, "X event %q args", ev.Name)
					}
					slices[th] = append(slices[th], ev)
				case "s":
					require.NotNil(t, ev.ID)
					starts[*ev.ID] = ev
				case "f":
					require.NotNil(t, ev.ID)
					assert.Equal(t, "e", ev.Bp, "flow ends bind to the enclosing slice")
					finishes[*ev.ID] = ev
				case "C":
					assert.True(t, strings.HasPrefix(ev.Name, "memory "), "counter %q is a memory's", ev.Name)
					assert.Contains(t, ev.Args, "temporaries", "counter %q args", ev.Name)
					assert.Contains(t, processNames, *ev.Pid, "the process of every counter is named")
				default:
					t.Errorf("unexpected phase %q", ev.Ph)
				}
			}
			assert.Equal(t, len(tr.Slices), xs)
			assert.Len(t, threadNames, len(tr.Lanes), "every lane is named")
			for th := range slices {
				assert.Contains(t, threadNames, th, "the thread of every slice is named")
				assert.Contains(t, processNames, th.pid, "the process of every slice is named")
			}
			for _, l := range tr.Lanes {
				assert.Equal(t, l.Title(), threadNames[thread{l.Device + 1, l.Stream + 1}])
				assert.Equal(t, "GPU 0", processNames[l.Device+1])
			}
			assert.Len(t, starts, len(tr.Flows))
			assert.Len(t, finishes, len(starts))
			within := func(ev rawEvent) int {
				n := 0
				for _, x := range slices[thread{*ev.Pid, *ev.Tid}] {
					if *x.Ts <= *ev.Ts && *ev.Ts <= *x.Ts+*x.Dur {
						n++
					}
				}
				return n
			}
			for id, s := range starts {
				f, ok := finishes[id]
				require.True(t, ok, "flow %d starts and finishes", id)
				assert.Equal(t, s.Cat, f.Cat)
				assert.Equal(t, s.Name, f.Name)
				assert.LessOrEqual(t, *s.Ts, *f.Ts, "flow %d goes forward in time", id)
				assert.Positive(t, within(s), "flow %d starts inside a slice", id)
				assert.Positive(t, within(f), "flow %d ends inside a slice", id)
			}
		})
	}
}

func TestChromeRoundTrip(t *testing.T) {
	for name, tr := range traces(t) {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tr.WriteChrome(&buf))
			back, err := trace.ReadChrome(&buf)
			require.NoError(t, err)
			assert.Equal(t, tr, back)

			var again bytes.Buffer
			require.NoError(t, back.WriteChrome(&again))
			var first bytes.Buffer
			require.NoError(t, tr.WriteChrome(&first))
			assert.Equal(t, first.String(), again.String(), "writing is deterministic")
		})
	}
}

func TestReadChromeErrors(t *testing.T) {
	lane := `{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"s (priority normal)","stream":0,"stream_name":"s","device":0,"priority":0,"kind":"compute"}}`
	slice := `{"name":"k","cat":"launch","ph":"X","ts":0,"dur":5,"pid":1,"tid":1,"args":{"op":"k","op_id":0,"kind":"launch","bytes":0}}`
	tests := []struct {
		name, json, msg string
	}{
		{"not json", `{"traceEvents": [`, "not Chrome Trace Event JSON"},
		{"a spec", "buffers:\n  x: {size: 4}\n", "not Chrome Trace Event JSON"},
		{"unnamed thread", `{"traceEvents":[` + slice + `]}`, "which no thread_name names"},
		{"no dur", `{"traceEvents":[` + lane + `,{"name":"k","ph":"X","ts":0,"pid":1,"tid":1,"args":{}}]}`, "has no dur"},
		{"bad kind", `{"traceEvents":[` + lane + `,{"name":"k","ph":"X","ts":0,"dur":1,"pid":1,"tid":1,"args":{"kind":"dance"}}]}`, `unknown op kind "dance"`},
		{"bad stream kind", `{"traceEvents":[` + strings.Replace(lane, `"compute"`, `"warp"`, 1) + `]}`, `unknown kind "warp"`},
		{"flow without end", `{"traceEvents":[` + lane + `,` + slice + `,{"name":"e0","cat":"wait","ph":"s","id":1,"ts":4,"pid":1,"tid":1,"args":{"event":0,"op_id":0}}]}`, "never finishes"},
		{"flow without start", `{"traceEvents":[` + lane + `,` + slice + `,{"name":"e0","cat":"wait","ph":"f","bp":"e","id":1,"ts":4,"pid":1,"tid":1,"args":{"event":0,"op_id":0}}]}`, "never starts"},
		{"no trace at all", `{"a":1}`, "not a trace: a trace is Chrome Trace Event JSON, an object with a traceEvents array"},
		{"no events", `{"traceEvents":[]}`, "the trace holds no events"},
		{"empty array", `[]`, "the trace holds no events"},
		{"dur near 2^63 ns", `{"traceEvents":[` + lane + `,` + strings.Replace(slice, `"dur":5`, `"dur":9223372036854775`, 1) + `]}`, "event 1: dur: 9.223372036854776e+15 µs is out of range"},
		{"dur beyond int64", `{"traceEvents":[` + lane + `,` + strings.Replace(slice, `"dur":5`, `"dur":1e300`, 1) + `]}`, "event 1: dur: 1e+300 µs is out of range"},
		{"negative dur", `{"traceEvents":[` + lane + `,` + strings.Replace(slice, `"dur":5`, `"dur":-5`, 1) + `]}`, "event 1: dur: -5 µs is negative"},
		{"ts beyond int64", `{"traceEvents":[` + lane + `,` + strings.Replace(slice, `"ts":0`, `"ts":-1e19`, 1) + `]}`, "event 1: ts: -1e+19 µs is out of range"},
		{"flow ts beyond int64", `{"traceEvents":[` + lane + `,` + slice + `,{"name":"e0","cat":"wait","ph":"s","id":1,"ts":1e40,"pid":1,"tid":1,"args":{"event":0,"op_id":0}}]}`, "event 2: ts: 1e+40 µs is out of range"},
		{"offset beyond int64", `{"traceEvents":[` + lane + `],"otherData":{"generator":"dagrun","rank":{"rank":0,"world":2,"offset_from_rendezvous_us":1e300}}}`, "offset_from_rendezvous_us: 1e+300 µs is out of range"},
		{"figure beyond int64", `{"traceEvents":[` + lane + `],"otherData":{"generator":"dagrun","est_makespan_us":1e300}}`, "est_makespan_us: 1e+300 µs is out of range"},
		{"flow outside slices", `{"traceEvents":[` + lane + `,` + slice + `,{"name":"e0","cat":"wait","ph":"s","id":1,"ts":9,"pid":1,"tid":1,"args":{"event":0,"op_id":0}},{"name":"e0","cat":"wait","ph":"f","bp":"e","id":1,"ts":4,"pid":1,"tid":1,"args":{"event":0,"op_id":0}}]}`, "lies in no slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trace.ReadChrome(strings.NewReader(tt.json))
			require.Error(t, err)
			var re *trace.ReadError
			require.True(t, errors.As(err, &re), "%T", err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

// The time axis of any trace in range has a handful of ticks: no span,
// however long, makes the picture run on.
func TestSVGAxisIsBounded(t *testing.T) {
	for _, span := range []time.Duration{1, 999, time.Second, 3 * trace.MaxTraceMicros * time.Microsecond, math.MaxInt64 - 1, math.MaxInt64} {
		tr := &trace.Trace{
			Lanes:  []trace.Lane{{Name: "s", Kind: planner.Compute}},
			Slices: []trace.Slice{{Name: "k", Kind: dag.Launch, Dur: span}},
		}
		done := make(chan int, 1)
		go func() {
			var b bytes.Buffer
			tr.WriteSVG(&b)
			done <- strings.Count(b.String(), `class="tick"`)
		}()
		select {
		case n := <-done:
			assert.LessOrEqual(t, n, 65, "span %d", span)
			assert.GreaterOrEqual(t, n, 2, "span %d", span)
		case <-time.After(5 * time.Second):
			t.Fatalf("span %d: drawing the axis did not end", span)
		}
	}
}

func TestReadChromeArrayForm(t *testing.T) {
	in := `[{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"s","stream":0,"stream_name":"s","device":0,"priority":1,"kind":"h2d"}},
	{"name":"c","ph":"X","ts":1.5,"dur":2.25,"pid":1,"tid":1,"args":{"op":"c","op_id":3,"kind":"copy","bytes":64}}]`
	tr, err := trace.ReadChrome(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, tr.Slices, 1)
	assert.Equal(t, trace.Slice{Op: 3, Name: "c", Kind: dag.Copy, Start: 1500, Dur: 2250, Bytes: 64}, tr.Slices[0])
	assert.Equal(t, trace.Lane{Stream: 0, Device: 0, Priority: dag.High, Kind: planner.CopyH2D, Name: "s"}, tr.Lanes[0])
}

// zeroDurations is a trace whose flows bind to zero-length slices that
// share their start with other slices.
func zeroDurations() *trace.Trace {
	return &trace.Trace{
		Lanes: []trace.Lane{
			{Stream: 0, Device: 0, Kind: planner.Compute, Name: "dev0.normal.compute0"},
			{Stream: 1, Device: 0, Kind: planner.Compute, Name: "dev0.normal.compute1"},
		},
		Slices: []trace.Slice{
			{Op: 0, Name: "a", Kind: dag.Alloc, Lane: 0, Start: 0},
			{Op: 1, Name: "b", Kind: dag.Launch, Lane: 0, Start: 0, Dur: 0},
			{Op: 2, Name: "c", Kind: dag.Free, Lane: 1, Start: 0},
			{Op: 3, Name: "d", Kind: dag.Launch, Lane: 1, Start: 0, Dur: time.Microsecond},
		},
		Flows: []trace.Flow{{Event: 0, From: 0, To: 2}, {Event: 1, From: 1, To: 3}},
	}
}
