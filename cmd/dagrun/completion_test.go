package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bash script completes in bash itself.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var script bytes.Buffer
	require.NoError(t, writeBashCompletion(&script))
	path := filepath.Join(t.TempDir(), "dagrun.bash")
	require.NoError(t, os.WriteFile(path, script.Bytes(), 0o644))
	// File names that word splitting or glob expansion would break.
	dir := t.TempDir()
	for _, f := range []string{"my spec.yaml", "[ab].yaml", "a.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "out dir"), 0o755))
	for _, tc := range []struct {
		words []string // the last is the word completed
		want  []string
	}{
		{[]string{"dagrun", "ru"}, []string{"run"}},
		{[]string{"dagrun", "k"}, []string{"kernels"}},
		{[]string{"dagrun", "run", "--rep"}, []string{"--repeat"}},
		{[]string{"dagrun", "run", "--trace-r"}, []string{"--trace-runs"}},
		{[]string{"dagrun", "run", "--js"}, []string{"--json"}},
		{[]string{"dagrun", "viz", "-"}, []string{"--help", "-o", "--format", "--streams", "--allow-path", "--save-dir"}},
		{[]string{"dagrun", "help", "pl"}, []string{"plan"}},
		{[]string{"dagrun", "run", "my"}, []string{"my spec.yaml"}},
		{[]string{"dagrun", "run", "["}, []string{"[ab].yaml"}},
		{[]string{"dagrun", "run", "-v", "[a"}, []string{"[ab].yaml"}},
		{[]string{"dagrun", "run", "--trace", "my"}, []string{"my spec.yaml"}},
		{[]string{"dagrun", "run", "--save-dir", ""}, []string{"out dir"}},
		{[]string{"dagrun", "run", "--backend", ""}, []string{"auto", "cpu", "cuda", "gpu"}},
		{[]string{"dagrun", "plan", "--backend", "c"}, []string{"cpu", "cuda"}},
		{[]string{"dagrun", "run", "--repeat", ""}, nil},
	} {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			cmd := exec.Command(bash, "--norc", "-c", `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _dagrun; for w in "${COMPREPLY[@]}"; do printf '%s\n' "$w"; done`, path)
			cmd.Args = append(cmd.Args, tc.words...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			var got []string
			for line := range strings.Lines(string(out)) {
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
