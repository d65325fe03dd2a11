package hostmem

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAvailable(t *testing.T) {
	free, total, err := Available()
	require.NoError(t, err)
	assert.Positive(t, free)
	assert.LessOrEqual(t, free, total)
}

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	cases := []struct {
		name, limit, used   string
		wantLimit, wantUsed int64
		ok                  bool
	}{
		{"v2 limit", "1073741824\n", "536870912\n", 1 << 30, 1 << 29, true},
		{"v2 max", "max\n", "5\n", 0, 0, false},
		{"v1 no limit", "9223372036854771712\n", "5\n", 0, 0, false},
		{"garbage", "lots\n", "5\n", 0, 0, false},
		{"negative use", "100\n", "-1\n", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, u, ok := readLimit(write("limit", c.limit), write("used", c.used))
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.wantLimit, l)
			assert.Equal(t, c.wantUsed, u)
		})
	}
	_, _, ok := readLimit(filepath.Join(dir, "absent"), filepath.Join(dir, "used"))
	assert.False(t, ok)
}
