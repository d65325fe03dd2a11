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
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"dagrun ru", []string{"run"}},
		{"dagrun k", []string{"kernels"}},
		{"dagrun run --rep", []string{"--repeat"}},
		{"dagrun run --trace-r", []string{"--trace-runs"}},
		{"dagrun viz -", []string{"--help", "-o", "--format", "--streams", "--allow-path", "--save-dir"}},
		{"dagrun help pl", []string{"plan"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			words := strings.Fields(tc.line)
			cmd := exec.Command(bash, "--norc", "-c", `source "$0"; COMP_WORDS=($1); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _dagrun; printf '%s\n' "${COMPREPLY[@]}"`, path, strings.Join(words, " "))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, tc.want, strings.Fields(string(out)))
		})
	}
}
