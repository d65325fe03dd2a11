package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTable(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        []Mutant
		err         string
	}{
		{"two mutants", "# why\n# more\nname a\nfile x.go\nfrom  if a < b {\nto if a <= b {\npkgs ./x ./y\nrun TestX\n\nname b\nfile y.go\nfrom f(1)\nto f(2)\npkgs ./y\nrun\n",
			[]Mutant{
				{Name: "a", Why: "why more", File: "x.go", From: "if a < b {", To: "if a <= b {", Pkgs: []string{"./x", "./y"}, Run: "TestX", Line: 3},
				{Name: "b", File: "y.go", From: "f(1)", To: "f(2)", Pkgs: []string{"./y"}, Line: 10},
			}, ""},
		{"no pkgs", "name a\nfile x.go\nfrom a\nto b\n", nil, "t:1: mutant a needs file, from and pkgs"},
		{"no change", "name a\nfile x.go\nfrom a\nto a\npkgs ./x\n", nil, "t:1: mutant a changes nothing"},
		{"unknown key", "name a\nfiel x.go\n", nil, `t:2: unknown key "fiel"`},
		{"twice", "name a\nfile x\nfrom a\nto b\npkgs ./x\n\nname a\nfile x\nfrom c\nto d\npkgs ./x\n", nil, "t:7: mutant a is named twice (also on line 1)"},
		{"no blank line", "name a\nfile x\nfrom a\nto b\npkgs ./x\nname b\n", nil, "t:6: mutant b starts inside mutant a: put a blank line between them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTable("t", strings.NewReader(tc.table))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestApply(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "x.go"), []byte("a := b < c\nd := e\nd := e\n"), 0o644))
	got, err := apply(root, "t", Mutant{Name: "m", File: "x.go", From: "b < c", To: "b <= c"})
	require.NoError(t, err)
	assert.Equal(t, "a := b <= c\nd := e\nd := e\n", string(got))

	for _, tc := range []struct {
		m    Mutant
		want string
	}{
		{Mutant{Name: "gone", File: "x.go", From: "b > c", Line: 7}, `t:7: mutant gone: the snippet "b > c" is no longer in x.go: the code was changed or moved`},
		{Mutant{Name: "twice", File: "x.go", From: "d := e", Line: 9}, `t:9: mutant twice: the snippet "d := e" occurs 2 times in x.go`},
		{Mutant{Name: "moved", File: "y.go", From: "b < c", Line: 3}, "t:3: mutant moved: open "},
	} {
		_, err := apply(root, "t", tc.m)
		var te *TableError
		require.True(t, errors.As(err, &te), "%v", err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestFailedTests(t *testing.T) {
	out := "--- FAIL: TestA (0.01s)\n    --- FAIL: TestA/sub (0.00s)\n--- FAIL: FuzzB (0.00s)\nFAIL\n"
	assert.Equal(t, []string{"TestA", "FuzzB"}, failedTests(out))
	assert.Equal(t, []string{"panic: boom [recovered]"}, failedTests("panic: boom [recovered]\n"))
	assert.True(t, buildFailed.MatchString("FAIL\tgithub.com/x/y [build failed]\n"))
	assert.False(t, buildFailed.MatchString("--- FAIL: TestA (0.01s)\n"))
}

// TestTableMatchesSource keeps the project's table true to the code: every
// snippet must still be in its file, once. When this fails after a
// refactor or a merge, move the mutant to where its code went.
func TestTableMatchesSource(t *testing.T) {
	root := filepath.Join("..", "..")
	f, err := os.Open("mutants.txt")
	require.NoError(t, err)
	defer f.Close()
	mutants, err := parseTable("internal/mutcheck/mutants.txt", f)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(mutants), 40)
	for _, m := range mutants {
		_, err := apply(root, "internal/mutcheck/mutants.txt", m)
		assert.NoError(t, err)
	}
}
