package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/dagrun/dagrun/cuda"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"dagrun": func() { os.Exit(runMain()) },
	})
}

// TestScripts runs the command end to end over testdata/script/*.txtar.
// Each script's work directory holds a copy of the repository's examples
// in examples/. The condition [cuda] holds where the CUDA backend opens.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			return copyExamples(filepath.Join(env.WorkDir, "examples"))
		},
		Condition: func(cond string) (bool, error) {
			if cond != "cuda" {
				return false, nil
			}
			b, err := cuda.New()
			if err != nil {
				return false, nil
			}
			return true, b.Close()
		},
	})
}

func copyExamples(dst string) error {
	files, err := filepath.Glob("../../examples/*.yaml")
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
