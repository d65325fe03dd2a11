package layouttest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMeasure(t *testing.T) {
	sh, err := Measure("testdata/shaped", "Whole")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"Whole": 3, "part": 1, "free": 1}, sh.Methods)
	assert.Equal(t, []string{"part.all", "part.w"}, sh.Holders)
	assert.Equal(t, 2, sh.Lines["extra.c"])
	assert.Equal(t, 17, sh.Lines["shaped.go"])
	assert.Empty(t, sh.DocFiles)

	sh, err = Measure("testdata/shaped", "")
	require.NoError(t, err)
	assert.Empty(t, sh.Holders)

	sh, err = Measure("testdata/cited", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"cited.go", "cited.c"}, sh.DocFiles)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		lim  Limits
		fail bool
	}{
		{"within", "shaped", Limits{Methods: 3, Lines: 17}, false},
		{"doc cites a file", "cited", Limits{Methods: 3, Lines: 17}, true},
		{"methods", "shaped", Limits{Methods: 2, Lines: 100}, true},
		{"lines", "shaped", Limits{Methods: 3, Lines: 16}, true},
		{"holders", "shaped", Limits{Methods: 3, Lines: 100, Whole: "Whole"}, true},
		{"owners", "shaped", Limits{Methods: 3, Lines: 100, Whole: "Whole", Owners: []string{"part"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Check(rec, "testdata/"+tc.dir, tc.lim)
			assert.Equal(t, tc.fail, rec.failed)
		})
	}
}

// recorder is a testing.TB that notes a failure instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Helper()               {}
