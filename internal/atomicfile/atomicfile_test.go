package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	text := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	require.NoError(t, Write(path, text("one")))
	require.NoError(t, Write(path, text("two")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	// A failed write leaves the old file and no temporary one.
	broken := errors.New("broken")
	err = Write(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return broken
	})
	require.ErrorIs(t, err, broken)
	got, _ = os.ReadFile(path)
	assert.Equal(t, "two", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	// A device is written to, not replaced.
	require.NoError(t, Write(os.DevNull, text("gone")))
	fi, err = os.Stat(os.DevNull)
	require.NoError(t, err)
	assert.False(t, fi.Mode().IsRegular())

	err = Write(filepath.Join(dir, "missing", "x"), text("x"))
	assert.ErrorContains(t, err, "writing "+filepath.Join(dir, "missing", "x")+": ")
	assert.NotContains(t, err.Error(), ".tmp", "the temporary name is left out")
}

// A write stopped by its context fails, at its next write or after its
// last, and leaves the old file.
func TestUntil(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.svg")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	err := Write(path, Until(ctx, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		cancel()
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, "more")
		return err
	}))
	require.ErrorIs(t, err, context.Canceled)
	got, _ := os.ReadFile(path)
	assert.Equal(t, "old", string(got))
	ctx, cancel = context.WithCancel(context.Background())
	err = Write(path, Until(ctx, func(w io.Writer) error {
		cancel() // after the last write
		return nil
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, Write(path, Until(context.Background(), func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	})))
	got, _ = os.ReadFile(path)
	assert.Equal(t, "new", string(got))
}
