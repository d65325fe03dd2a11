package spec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A program's outputs may neither hit one file twice nor overwrite what is
// read; standard output, special files and one file read and written under
// one role are fine.
func TestCheckFileUses(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.yaml")
	require.NoError(t, os.WriteFile(in, []byte("x"), 0o644))
	link := filepath.Join(dir, "link.yaml")
	require.NoError(t, os.Symlink(in, link))
	out := filepath.Join(dir, "out.json")
	reads := []FileUse{{in, "the spec"}, {out, "--perf-model"}}
	assert.NoError(t, CheckFileUses(reads, []FileUse{{out, "--perf-model"}, {"-", "-o"}, {"", "--trace"}, {os.DevNull, "-o"}, {os.DevNull, "--trace"}}))
	assert.EqualError(t, CheckFileUses(reads, []FileUse{{out, "-o"}, {out, "--trace"}}),
		"--trace "+out+" is also written as -o: write each file once")
	assert.EqualError(t, CheckFileUses(reads, []FileUse{{link, "-o"}}),
		"-o "+link+" would overwrite the spec: write to another file")
}

// A spec's uses are its file, what it reads and its save paths; one from
// standard input has no file of its own.
func TestFileUses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	src := "buffers:\n  h: {dtype: f32, count: 4, placement: pinned, init: zeros}\nops:\n  - {host: save, buffer: h, path: h.bin}\n"
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	s, err := Load(path)
	require.NoError(t, err)
	reads, writes := s.FileUses()
	assert.Equal(t, []FileUse{{path, "the spec"}}, reads)
	assert.Equal(t, []FileUse{{filepath.Join(dir, "h.bin"), "a save path of the spec"}}, writes)
	s, err = Parse("-", []byte(src), WithBaseDir(dir))
	require.NoError(t, err)
	reads, _ = s.FileUses()
	assert.Empty(t, reads)
}
