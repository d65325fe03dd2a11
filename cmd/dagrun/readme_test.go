package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's first commands work in a clone, before the module is
// published anywhere: what go install names resolves without the network,
// dagrun runs a file the clone holds, and make has the target.
func TestReadmeFirstCommands(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "README has no sh block")
	var kinds []string
	for line := range strings.Lines(string(block[1])) {
		cmd, _, _ := strings.Cut(line, "#")
		f := strings.Fields(cmd)
		if len(f) == 0 {
			continue
		}
		kinds = append(kinds, f[0])
		switch {
		case f[0] == "go" && len(f) == 3 && f[1] == "install":
			list := exec.Command(goTool, "list", f[2])
			list.Dir = "../.."
			list.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
			out, err := list.CombinedOutput()
			assert.NoError(t, err, "%s: %s", strings.TrimSpace(line), out)
		case f[0] == "dagrun" && len(f) == 3 && f[1] == "run":
			assert.FileExists(t, filepath.Join("../..", f[2]))
		case f[0] == "make" && len(f) == 2:
			mk, err := os.ReadFile("../../Makefile")
			require.NoError(t, err)
			assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(f[1])+":", string(mk))
		default:
			t.Errorf("README's first commands: %q is not one this test checks", strings.TrimSpace(line))
		}
	}
	assert.Equal(t, []string{"go", "dagrun", "make"}, kinds, "install, run an example, run the tests")
}
