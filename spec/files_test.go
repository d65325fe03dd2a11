package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree makes dir/spec/ with w.bin (16 bytes) in it and secret.bin beside
// spec/, and returns dir.
func tree(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "spec", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spec", "w.bin"), make([]byte, 16), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spec", "sub", "v.bin"), make([]byte, 16), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.bin"), make([]byte, 16), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(dir, "secret.bin"), filepath.Join(dir, "spec", "link.bin")))
	return dir
}

func TestPaths(t *testing.T) {
	dir := tree(t)
	specFile := filepath.Join(dir, "spec", "s.yaml")
	const ops = "ops: [{fill: {buffer: h, value: 1}}]\n"
	cases := []struct {
		name, src string
		opts      []Option
		want      []string
	}{
		{"inside", "buffers:\n  h: {placement: pinned, init: {file: w.bin}}\n  v: {init: {file: sub/v.bin}}\n" + ops, nil, nil},
		{"dot dot", "buffers:\n  h: {placement: pinned, init: {file: ../secret.bin}}\n" + ops, nil, []string{
			`2:39: buffer "h" init file ../secret.bin leaves the spec's directory (` + pathHint + `)`}},
		{"dot dot allowed", "buffers:\n  h: {placement: pinned, init: {file: ../secret.bin}}\n" + ops, []Option{AllowPath(dir)}, nil},
		{"absolute", "buffers:\n  h: {placement: pinned, init: {file: " + filepath.Join(dir, "secret.bin") + "}}\n" + ops, nil, []string{
			`2:39: buffer "h" init file ` + filepath.Join(dir, "secret.bin") + ` is an absolute path (` + pathHint + `)`}},
		{"absolute allowed", "buffers:\n  h: {placement: pinned, init: {file: " + filepath.Join(dir, "secret.bin") + "}}\n" + ops, []Option{AllowPath(dir)}, nil},
		{"symlink out", "buffers:\n  h: {placement: pinned, init: {file: link.bin}}\n" + ops, nil, []string{
			`2:39: buffer "h" init file link.bin: path escapes from parent (paths are relative to the spec's directory)`}},
		{"kernel file out", "buffers:\n  h: {size: 16, placement: pinned}\nkernels:\n  k: {ptx: ../../k.ptx}\n" + ops, nil, []string{
			`4:12: kernel "k" ptx ../../k.ptx leaves the spec's directory (` + pathHint + `)`}},
		{"two writes", "buffers:\n  h: {size: 16, placement: pinned}\n" + "ops:\n  - {host: save, buffer: h, path: out/h.bin}\noutputs:\n  - {buffer: h, save: out/../out/h.bin}\n", nil, []string{
			`6:23: output save out/../out/h.bin is also written at t.yaml:4:35 (write each file once)`}},
		{"write the spec", "buffers:\n  h: {size: 16, placement: pinned}\n" + ops + "outputs:\n  - {buffer: h, save: s.yaml}\n", nil, []string{
			`5:23: output save s.yaml is the spec itself (save to another file)`}},
		{"write a read file", "buffers:\n  h: {placement: pinned, init: {file: w.bin}}\n" + "ops:\n  - {host: save, buffer: h, path: ./w.bin}\n", nil, []string{
			`4:35: ops[0] save path ./w.bin is a file the spec reads (save to another file)`}},
		{"write out", "buffers:\n  h: {size: 16, placement: pinned}\n" + ops + "outputs:\n  - {buffer: h, save: ../x.bin}\n  - {buffer: h, save: /tmp/x.bin}\n", nil, []string{
			`5:23: output save ../x.bin leaves the spec's directory (save paths are relative to the save directory (the spec's, or --save-dir) and stay inside it; pass --allow-path DIR to allow another tree)`,
			`6:23: output save /tmp/x.bin is an absolute path (save paths are relative to the save directory (the spec's, or --save-dir) and stay inside it; pass --allow-path DIR to allow another tree)`}},
		{"write to the save dir", "buffers:\n  h: {size: 16, placement: pinned}\n" + ops + "outputs:\n  - {buffer: h, save: s.yaml}\n", []Option{WithSaveDir(filepath.Join(dir, "out"))}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(specFile, []byte(c.src), c.opts...)
			require.NotNil(t, s)
			var got []string
			for _, e := range Errors(err) {
				got = append(got, strings.TrimPrefix(strings.ReplaceAll(e.Error(), specFile, "t.yaml"), "t.yaml:"))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// A spec read from stdin takes its paths from the base directory.
func TestBaseDir(t *testing.T) {
	dir := tree(t)
	src := []byte("buffers:\n  h: {placement: pinned, init: {file: w.bin}}\nops: [{fill: {buffer: h, value: 1}}]\n")
	_, err := Parse("-", src, WithBaseDir(filepath.Join(dir, "spec")))
	require.NoError(t, err)
	_, err = Parse("-", src, WithBaseDir(dir))
	require.Error(t, err, "w.bin is not in dir")
}

func TestWriteFile(t *testing.T) {
	dir := tree(t)
	specFile := filepath.Join(dir, "spec", "s.yaml")
	s, err := Parse(specFile, []byte("buffers: {h: {size: 4, placement: pinned}}\nops: [{fill: {buffer: h, value: 1}}]\n"))
	require.NoError(t, err)

	require.NoError(t, s.WriteFile("out/a.bin", []byte("new")))
	got, err := os.ReadFile(filepath.Join(dir, "spec", "out", "a.bin"))
	require.NoError(t, err)
	assert.Equal(t, "new", string(got), "relative to the spec's directory by default")
	assert.Equal(t, filepath.Join(dir, "spec", "out", "a.bin"), s.SavePath("out/a.bin"))
	require.NoError(t, s.WriteFile("out/a.bin", []byte("newer")))
	got, _ = os.ReadFile(filepath.Join(dir, "spec", "out", "a.bin"))
	assert.Equal(t, "newer", string(got), "replaced whole")
	entries, err := os.ReadDir(filepath.Join(dir, "spec", "out"))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left beside it")

	for _, p := range []string{"../x.bin", filepath.Join(dir, "x.bin"), "link.bin"} {
		assert.Error(t, s.WriteFile(p, []byte("x")), p)
	}
	_, err = os.Stat(filepath.Join(dir, "x.bin"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	secret, _ := os.ReadFile(filepath.Join(dir, "secret.bin"))
	assert.Equal(t, make([]byte, 16), secret, "the symlink's target is untouched")

	s.SaveDir = filepath.Join(dir, "saved")
	require.NoError(t, os.Mkdir(s.SaveDir, 0o755))
	require.NoError(t, s.WriteFile("b.bin", []byte("b")))
	assert.FileExists(t, filepath.Join(dir, "saved", "b.bin"))

	s, err = Parse(specFile, []byte("buffers: {h: {size: 4, placement: pinned}}\nops: [{fill: {buffer: h, value: 1}}]\n"), AllowPath(dir))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile("../allowed.bin", []byte("a")))
	assert.FileExists(t, filepath.Join(dir, "allowed.bin"))
}

// An init file that is a FIFO (or another special file) is refused at
// once: opening it would wait for a writer forever.
func TestSpecialFilesRefusedWithoutBlocking(t *testing.T) {
	dir := tree(t)
	fifo := filepath.Join(dir, "spec", "fifo.bin")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	specFile := filepath.Join(dir, "spec", "s.yaml")
	for _, c := range []struct{ name, file, want string }{
		{"fifo", "fifo.bin", `2:39: buffer "h" init file fifo.bin is not a regular file (it is a named pipe) (name a regular file)`},
		{"directory", "sub", `2:39: buffer "h" init file sub is not a regular file (it is a directory) (name a regular file)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan []string, 1)
			go func() {
				_, err := Parse(specFile, []byte("buffers:\n  h: {placement: pinned, init: {file: "+c.file+"}}\nops: [{fill: {buffer: h, value: 1}}]\n"))
				var got []string
				for _, e := range Errors(err) {
					got = append(got, strings.TrimPrefix(e.Error(), specFile+":"))
				}
				done <- got
			}()
			select {
			case got := <-done:
				assert.Equal(t, []string{c.want}, got)
			case <-time.After(5 * time.Second):
				os.WriteFile(fifo, nil, 0) // let the blocked open go, so the test can end
				t.Fatal("reading the spec's init file blocked")
			}
		})
	}
}
