package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/spec"
)

// TestFailOpEveryOpOfEveryExample runs every example once per op with
// --fail-op on the CPU backend, each output saved to a file: every run
// exits 1 with the op named at its place, and writes no file at all.
// Every op of every example is failed, those of loops' and branches'
// bodies too (no sampling: about 250 runs); a body op that never runs
// (a branch not taken) fails nothing.
func TestFailOpEveryOpOfEveryExample(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	runs := 0
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err)
		if !smallExample(s) {
			continue
		}
		// A copy of the example whose outputs are all saved.
		dir := t.TempDir()
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var saves strings.Builder
		saves.WriteString("\noutputs:\n")
		for _, out := range s.Outputs {
			saves.WriteString("  - {buffer: " + out.Buffer.Name + ", save: " + out.Buffer.Name + ".bin}\n")
		}
		body := withoutOutputs(string(data))
		path := filepath.Join(dir, filepath.Base(f))
		require.NoError(t, os.WriteFile(path, []byte(body+saves.String()), 0o644))

		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"run", "--backend", "cpu", path}, nil, &stdout, &stderr), "%s: %s", f, stderr.String())
		for _, out := range s.Outputs {
			require.FileExists(t, filepath.Join(dir, out.Buffer.Name+".bin"))
			require.NoError(t, os.Remove(filepath.Join(dir, out.Buffer.Name+".bin")))
		}
		var ops []*dag.Op
		s.Graph.Walk(func(op *dag.Op) { ops = append(ops, op) }) // bodies' ops too
		for _, op := range ops {
			runs++
			stdout.Reset()
			stderr.Reset()
			code := run([]string{"run", "--backend", "cpu", "--fail-op", op.Name, path}, nil, &stdout, &stderr)
			if code == 0 && op.Index >= len(s.Graph.Ops) {
				// A body op of a branch not taken, or of a loop that ran
				// no iteration, never runs: neither does its fault.
				for _, out := range s.Outputs {
					require.NoError(t, os.Remove(filepath.Join(dir, out.Buffer.Name+".bin")))
				}
				continue
			}
			assert.Equal(t, 1, code, "%s --fail-op %s: %s", f, op.Name, stderr.String())
			assert.Regexp(t, `(?m)^`+regexpQuote(path)+`:\d+:\d+: op "`+regexpQuote(op.Name)+`" failed: injected fault`, stderr.String())
			assert.Contains(t, stderr.String(), "outputs not written")
			// A host step that does not follow the failed op may have
			// run (and printed) before the fault stopped the run; one
			// that follows it must not have.
			if op.Index < len(s.Graph.Ops) && followsAll(s.Graph, op.ID) {
				assert.Empty(t, stdout.String(), "%s --fail-op %s", f, op.Name)
			}
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, left, 1, "%s --fail-op %s left files behind", f, op.Name)
		}
	}
	t.Logf("%d runs with --fail-op", runs)
}

// followsAll reports whether every host step of g follows op id.
func followsAll(g *dag.Graph, id int) bool {
	after := make([]bool, len(g.Ops))
	after[id] = true
	for _, op := range g.Ops[id+1:] {
		for _, d := range op.Deps {
			if after[d] {
				after[op.ID] = true
				break
			}
		}
	}
	for _, op := range g.Ops {
		if op.Kind == dag.Host && !after[op.ID] {
			return false
		}
	}
	return true
}

// withoutOutputs is a spec without its outputs: section (a top-level key
// and the lines under it).
func withoutOutputs(body string) string {
	var keep []string
	in := false
	for line := range strings.Lines(body) {
		switch {
		case strings.HasPrefix(line, "outputs:"):
			in = true
			continue
		case in && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "-") || strings.TrimSpace(line) == ""):
			continue
		}
		in = false
		keep = append(keep, line)
	}
	return strings.Join(keep, "")
}

// TestChaosEveryExample runs every example under --chaos for 20 seeds on
// the CPU backend: the printed outputs (checksums of every byte) are those
// of the plain run.
func TestChaosEveryExample(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	outputs := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(append([]string{"run", "--backend", "cpu"}, args...), nil, &stdout, &stderr), stderr.String())
		var keep []string
		for line := range strings.Lines(stdout.String()) {
			if !strings.HasPrefix(line, "ran ") {
				keep = append(keep, line)
			}
		}
		require.NotEmpty(t, keep)
		return strings.Join(keep, "")
	}
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err)
		if !smallExample(s) {
			continue
		}
		want := outputs(f)
		for seed := range 20 {
			assert.Equal(t, want, outputs("--chaos", strconv.Itoa(seed), f), "%s --chaos %d", f, seed)
		}
	}
}

// smallExample reports whether an example runs quickly on the CPU backend
// as one rank of one device: the model block and the ranks have tests of
// their own.
func smallExample(s *spec.Spec) bool {
	var bytes int64
	for _, b := range s.Graph.Buffers {
		if b.Placement == dag.Device && b.Device != 0 {
			return false
		}
		bytes += b.Size
	}
	return s.Run.World <= 1 && bytes <= 64<<20
}
