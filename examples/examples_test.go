package examples_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// expected checks an example's outputs against values computed here, from
// the example's description, not from a run. in gives the initial contents
// of a buffer, by name.
type expected func(t *testing.T, in, out func(name string) []float32)

var checks = map[string]expected{
	"double_buffer.yaml": func(t *testing.T, in, out func(string) []float32) {
		x, got := in("h_in"), out("h_out")
		require.Len(t, got, 4<<20)
		for i, v := range x {
			want := float32(2*v) + float32(0.5)
			if got[i] != want {
				t.Fatalf("h_out[%d] = %v, want 2 * %v + 0.5 = %v", i, got[i], v, want)
			}
		}
	},
	"fan_out.yaml": func(t *testing.T, _, out func(string) []float32) {
		var total float64
		want := make([]float32, 8)
		for b := range 8 {
			var s float64
			for i := 1024 * b; i < 1024*(b+1); i++ {
				s += float64((b + 1) * i)
			}
			want[b] = float32(s)
			total += float64(want[b])
		}
		assert.Equal(t, want, out("h_partials"))
		assert.Equal(t, []float32{float32(total)}, out("h_total"))
		assert.Equal(t, float32(195016704), float32(total))
	},
	"priority.yaml": func(t *testing.T, _, out func(string) []float32) {
		for i, v := range out("h_resp") {
			require.Equal(t, float32(7), v, "h_resp[%d]", i)
		}
		for i, v := range out("h_bulk") {
			require.Equal(t, float32(4*i), v, "h_bulk[%d]", i)
		}
	},
	"profile_guided.yaml": func(t *testing.T, _, out func(string) []float32) {
		// Every element of a is 0.001 and of b 0.002: c = k * 0.001 * 0.002.
		for c, k := range map[string]float64{"c0": 1000, "c1": 100, "c2": 1000, "c3": 100, "c4": 100, "c5": 100} {
			got := out(c)
			require.Len(t, got, 1024, c)
			for i, v := range got {
				require.InDelta(t, k*0.001*0.002, float64(v), 1e-6, "%s[%d]", c, i)
			}
		}
	},
	"temporaries.yaml": func(t *testing.T, in, out func(string) []float32) {
		x, got := in("h_in"), out("h_out")
		var sum float64
		for i, v := range x {
			sum += float64(v)
			want := float32(1) + float32(0.5)*(float32(v+v)*3)
			require.Equal(t, want, got[i], "h_out[%d] from %v", i, v)
		}
		assert.Equal(t, []float32{float32(sum)}, out("h_sum"))
	},
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Every example spec runs on the CPU backend and computes what its header
// says, under every stream budget and with random delays before each op; its
// plan passes the verifier.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(checks), "every example has a check")
	for _, f := range files {
		check := checks[f]
		require.NotNil(t, check, "no check for %s", f)
		s, err := spec.Load(f)
		require.NoError(t, err)
		require.Empty(t, s.Warnings)
		for _, streams := range []int{s.Run.Streams, 1, 8} {
			for _, delays := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/streams=%d/delays=%v", f, streams, delays), func(t *testing.T) {
					p, err := planner.New(s.Graph, planner.Options{Streams: streams, SharedCopyStreams: s.Run.SharedCopyStreams})
					require.NoError(t, err)
					require.NoError(t, planner.Verify(p))
					var opts []cpu.Option
					if delays {
						opts = append(opts, cpu.Delays(int64(streams), 50*time.Microsecond))
					}
					mem, err := executor.Execute(context.Background(), cpu.New(opts...), p)
					require.NoError(t, err)
					byName := func(name string) *dag.Buffer {
						for _, b := range s.Graph.Buffers {
							if b.Name == name {
								return b
							}
						}
						t.Fatalf("%s has no buffer %s", f, name)
						return nil
					}
					check(t,
						func(name string) []float32 { return floats(byName(name).InitialBytes()) },
						func(name string) []float32 { return floats(mem[byName(name)]) })
				})
			}
		}
	}
}
