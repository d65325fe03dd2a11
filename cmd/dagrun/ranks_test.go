package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// TestRankScripts runs testdata/ranks/*.txtar: specs with collectives and
// run.world, run as ranks in one process and as processes.
func TestRankScripts(t *testing.T) {
	var ports portPool
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/ranks",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			if err := ports.set(env); err != nil {
				return err
			}
			if err := copyExamples(filepath.Join(env.WorkDir, "examples")); err != nil {
				return err
			}
			return copyRankExamples(filepath.Join(env.WorkDir, "examples", "ranks"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpout":   cmpout,
			"status":   status,
			"rankouts": rankOutputs,
		},
	})
}

// copyRankExamples copies examples/ranks/*.yaml, the examples of ranks, to
// dst.
func copyRankExamples(dst string) error {
	files, err := filepath.Glob("../../examples/ranks/*.yaml")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TestRankExampleValues runs examples/ranks/data_parallel.yaml as a world
// of 2 and 3 ranks and checks the all-reduced gradient against the one its
// header describes, computed here from each rank's x: NCCL's float avg,
// each rank's 2*x times 1/N in f32, summed in rank order.
func TestRankExampleValues(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var specs []*spec.Spec
			var plans []*planner.Plan
			for r := range n {
				s, err := loadSpecFile("../../examples/ranks/data_parallel.yaml", specFiles{saveDir: t.TempDir(), extra: []spec.Option{spec.WithRank(r, n)}})
				require.NoError(t, err)
				p, err := makePlan(job.NewRank(s, r, nil, os.Getenv).Spec, job.Layout{})
				require.NoError(t, err)
				specs, plans = append(specs, s), append(plans, p)
			}
			w, err := executor.OpenWorld(t.Context(), cpu.New(), plans)
			require.NoError(t, err)
			defer w.Close()
			require.NoError(t, w.Run(t.Context()))
			buffer := func(s *spec.Spec, name string) *dag.Buffer {
				for _, b := range s.Graph.Buffers {
					if b.Name == name {
						return b
					}
				}
				t.Fatalf("no buffer %s", name)
				return nil
			}
			f32s := func(b []byte) []float32 {
				out := make([]float32, len(b)/4)
				for i := range out {
					out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
				}
				return out
			}
			want := make([]float32, 4096)
			for r := range n {
				x := f32s(buffer(specs[r], "x").InitialBytes())
				for i, v := range x {
					want[i] += (2 * v) * (1 / float32(n))
				}
			}
			for r := range n {
				got, err := w.Read(r, buffer(specs[r], "h_grad"))
				require.NoError(t, err)
				require.Equal(t, want, f32s(got), "rank %d", r)
			}
			x0, err := w.Read(0, buffer(specs[0], "x"))
			require.NoError(t, err)
			x1, err := w.Read(1, buffer(specs[1], "x"))
			require.NoError(t, err)
			assert.NotEqual(t, x0, x1, "per_rank random inits differ by rank")
		})
	}
}

// rankOutputs (rankouts WORLD PART...) checks that the output lines of a
// run of ranks in one process (the file WORLD) are those of its processes
// (the files PART, one per process), line for line: "rank R output ...".
func rankOutputs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || neg {
		ts.Fatalf("usage: rankouts WORLD PART...")
	}
	outputs := func(name string) []string {
		var keep []string
		for line := range strings.Lines(ts.ReadFile(name)) {
			if strings.HasPrefix(line, "rank ") && strings.Contains(line, " output ") {
				keep = append(keep, line)
			}
		}
		return keep
	}
	want := outputs(args[0])
	var got []string
	for _, part := range args[1:] {
		got = append(got, outputs(part)...)
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(want, got) {
		ts.Fatalf("the outputs of %s and of %v differ:\n%s---\n%s", args[0], args[1:], strings.Join(want, ""), strings.Join(got, ""))
	}
}
