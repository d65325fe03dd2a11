package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/dagrun/dagrun/spec"
)

// TestRankScripts runs testdata/ranks/*.txtar: specs with collectives and
// run.world, run as ranks in one process and as processes. They need a
// spec loader with ranks (collective keys, run.world, {rank} paths); where
// it has none they are skipped, saying so.
func TestRankScripts(t *testing.T) {
	probe := "run: {world: 2}\nbuffers: {x: {dtype: f32, count: 4}}\nops: [{all_reduce: {view: x}}]\n"
	if s, err := spec.Parse("probe.yaml", []byte(probe)); err != nil || specWorld(s) != 2 {
		t.Skipf("the spec loader or the CLI does not know ranks yet (%v): these scripts need branch specx and ranks_spec.go's MERGE edits", err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/ranks",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			return copyExamples(filepath.Join(env.WorkDir, "examples"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpout": cmpout,
			"status": status,
		},
	})
}
