package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// ReadOutputs reads every output in order, saves those with a save path
// and sums them once wait returns; a failed read returns what came before.
func TestReadOutputs(t *testing.T) {
	dir := t.TempDir()
	src := `buffers:
  a: {dtype: f32, count: 2, placement: pinned, init: zeros}
  b: {dtype: u8, count: 3, placement: pinned, init: zeros}
outputs: [a, {buffer: b, save: b.bin}]
ops:
  - {host: save, buffer: a, path: a.bin, name: keep}
`
	s, err := Parse("o.yaml", []byte(src), WithSaveDir(dir))
	require.NoError(t, err)
	contents := map[string][]byte{"a": f32s(1, 2.5), "b": {1, 2, 3}}
	read := func(b *dag.Buffer) ([]byte, error) { return contents[b.Name], nil }
	outs, wait, err := s.ReadOutputs(read)
	require.NoError(t, err)
	wait()
	a, b := Checksum(contents["a"], dag.F32), Checksum(contents["b"], dag.U8)
	assert.Equal(t, []OutputResult{
		{Buffer: "a", DType: "f32", Bytes: 8, Sum: JSONFloat(a.Sum), FNV: fnvHex(a.FNV)},
		{Buffer: "b", DType: "u8", Bytes: 3, Sum: 6, FNV: fnvHex(b.FNV), Saved: filepath.Join(dir, "b.bin")},
	}, outs)
	saved, err := os.ReadFile(filepath.Join(dir, "b.bin"))
	require.NoError(t, err)
	assert.Equal(t, contents["b"], saved)
	assert.Equal(t, []SavedFile{{Op: "keep", View: "a", Saved: filepath.Join(dir, "a.bin")}}, s.SavedFiles())
	assert.Equal(t, "saved a to "+filepath.Join(dir, "a.bin")+" (host step keep)", s.SavedFiles()[0].String())

	broken := errors.New("gone")
	outs, wait, err = s.ReadOutputs(func(b *dag.Buffer) ([]byte, error) {
		if b.Name == "b" {
			return nil, broken
		}
		return contents[b.Name], nil
	})
	require.ErrorIs(t, err, broken)
	assert.ErrorContains(t, err, "reading output b")
	wait()
	require.Len(t, outs, 1)
	assert.Equal(t, fnvHex(a.FNV), outs[0].FNV)
}

func fnvHex(v uint64) string { return fmt.Sprintf("%016x", v) }

func TestJSONFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{1.5, `1.5`}, {math.NaN(), `"NaN"`}, {math.Inf(-1), `"-Inf"`}} {
		got, err := json.Marshal(JSONFloat(tc.v))
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(got))
	}
}
