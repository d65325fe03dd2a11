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

	sh, err = Measure("testdata/shaped", "")
	require.NoError(t, err)
	assert.Empty(t, sh.Holders)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		fail bool
	}{
		{"within", Limits{Methods: 3, Lines: 17}, false},
		{"methods", Limits{Methods: 2, Lines: 100}, true},
		{"lines", Limits{Methods: 3, Lines: 16}, true},
		{"holders", Limits{Methods: 3, Lines: 100, Whole: "Whole"}, true},
		{"owners", Limits{Methods: 3, Lines: 100, Whole: "Whole", Owners: []string{"part"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Check(rec, "testdata/shaped", tc.lim)
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
